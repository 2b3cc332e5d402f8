"""The one list of model tasks: what each model deployment serves and which tasks are required.

A task is `<kind>.<category>`: the image tasks each score one category; the text task's model scores
every text category at once. Required tasks must be named by a deployment's `user_config`; the others
(beta image categories) may be left out, and a profile that enables them then gets no score for them.
"""

from __future__ import annotations

IMAGE_TASKS = ("image.nsfw", "image.weapon", "image.violence")
TEXT_TASKS = ("text.toxic",)
# The text reader of images (models/image_text.py), served by a deployment of its own (ImageTextModel); the words it
# reads are scored by the text model, as the image category `text_toxic`.
IMAGE_TEXT_TASKS = ("image.text",)
# The text cascade's second stage (models/text_cascade.py), served by a deployment of its own (GemmaModel).
SECOND_STAGE_TASKS = ("text.second_stage",)
TASKS = IMAGE_TASKS + TEXT_TASKS + SECOND_STAGE_TASKS + IMAGE_TEXT_TASKS
REQUIRED_TASKS = ("image.nsfw", "text.toxic")


def category_of(task: str) -> str:
    """`image.nsfw` -> `nsfw`."""
    return task.split(".", 1)[1]
