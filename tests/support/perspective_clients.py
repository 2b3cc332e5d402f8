"""What real Perspective clients send, read from their source: for each client the URL it builds from its base URL
setting (`join`), the query, the headers and the JSON body, so that a test replays exactly that request.

Each shape cites its source as repo@commit:path:lines (the commit of the stored version read; line numbers of that
version). A client whose Google host is hard-coded in its source gets, as `base_url`, what the one-line change puts
in place of `https://commentanalyzer.googleapis.com`; a client built from the discovery document gets the document's
`rootUrl` (this service answers its own address there).

The settings' names the tests configure live here too (`CORS_ORIGINS_SETTING`), so that a test reads each from one
place.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

# Perspective's production attributes (and SEXUALLY_EXPLICIT, which it also served widely): each is served here in
# every language, whatever `languages` says.
PRODUCTION_ATTRIBUTES = (
    "TOXICITY", "SEVERE_TOXICITY", "IDENTITY_ATTACK", "INSULT", "PROFANITY", "THREAT", "SEXUALLY_EXPLICIT",
)  # fmt: skip
# The languages Perspective served TOXICITY in, its last "languages in production" list (perspective.py's TOXICITY
# doc lists the same but Swedish: Yilmaz4/perspective.py@e789bede5579a6f0f7968cfdad7139379e2c4d21:
# perspective/attributes.py, class TOXICITY).
PERSPECTIVE_LANGUAGES = (
    "ar", "zh", "cs", "nl", "en", "fr", "de", "hi", "hi-Latn", "id", "it", "ja", "ko", "pl", "pt", "ru", "es", "sv",
)  # fmt: skip
# Perspective's experimental and New York Times attributes: no model here backs them.
UNSUPPORTED_ATTRIBUTES = (
    "ATTACK_ON_AUTHOR", "ATTACK_ON_COMMENTER", "INCOHERENT", "INFLAMMATORY", "LIKELY_TO_REJECT", "OBSCENE", "SPAM",
    "UNSUBSTANTIAL", "FLIRTATION",
)  # fmt: skip
# Names a client may send for a served attribute -> the attribute they mean. OSMod strips an `@version` suffix from
# the answer's names (conversationai/conversationai-moderator@b8a5bb9e39264db1a000937094c035231ff0e7f0:
# packages/backend-api/src/pipeline/apiShim.ts:74-77); perspective.py lists the `_EXPERIMENTAL` spellings
# (Yilmaz4/perspective.py@e789bede5579a6f0f7968cfdad7139379e2c4d21:perspective/attributes.py:7-14).
ALIASES = {
    "TOXICITY_EXPERIMENTAL": "TOXICITY", "SEVERE_TOXICITY_EXPERIMENTAL": "SEVERE_TOXICITY",
    "IDENTITY_ATTACK_EXPERIMENTAL": "IDENTITY_ATTACK", "INSULT_EXPERIMENTAL": "INSULT",
    "PROFANITY_EXPERIMENTAL": "PROFANITY", "THREAT_EXPERIMENTAL": "THREAT", "TOXICITY@v1": "TOXICITY",
    "SEVERE_TOXICITY@v2": "SEVERE_TOXICITY",
}  # fmt: skip

# Google's refusal of an attribute, as googleapiclient logged it from Google (a public research script's HttpError:
# 'Attribute SEXUALLY_EXPLICIT does not support request languages: om'. Details: [{'@type':
# 'type.googleapis.com/google.commentanalyzer.v1alpha1.Error', 'errorType': 'LANGUAGE_NOT_SUPPORTED_BY_ATTRIBUTE',
# 'languageNotSupportedByAttributeError': {'detectedLanguages': ['om'], 'attribute': 'SEXUALLY_EXPLICIT'}}]).
# Clients that drop a refused attribute and ask again read `errorType` and `...Error.attribute`.
ERROR_DETAIL_TYPE = "type.googleapis.com/google.commentanalyzer.v1alpha1.Error"
UNSUPPORTED_ERROR_TYPE = "LANGUAGE_NOT_SUPPORTED_BY_ATTRIBUTE"
UNSUPPORTED_DETAIL = "languageNotSupportedByAttributeError"


def unsupported_message(attribute: str, languages: list[str]) -> str:
    """Google's message for an attribute it does not serve in these languages."""
    return f"Attribute {attribute} does not support request languages: {', '.join(languages)}"


# The setting that lists the page origins allowed to call the Perspective routes from a browser (CORS), and its
# value's form (a JSON list, as the other list settings of docs/configuration.md). The operator may instead (or
# too) allow a key's origins as for the widget: `PUT /admin/v1/keys/{id}/widget`.
CORS_ORIGINS_SETTING = "MODERATION_PERSPECTIVE_CORS_ORIGINS"


def cors_setting_value(origins: list[str]) -> str:
    return json.dumps(origins)


DISCOVERY_PATH = "/$discovery/rest?version=v1alpha1"
ANALYZE, SUGGEST = "comments:analyze", "comments:suggestscore"


@dataclass(frozen=True)
class Shape:
    """One request a client sends: which client (its URL joining is `join`'s), the operation, the body, the query
    besides the key, the headers, where the key goes, and what the answer must hold."""

    client: str
    name: str
    body: dict
    source: str
    operation: str = ANALYZE
    method: str = "POST"
    query: dict = field(default_factory=dict)
    headers: dict = field(default_factory=lambda: {"Content-Type": "application/json"})
    key_in: str = "query"  # "query": ?key=..., "bearer": Authorization: Bearer ...
    expect: str = "scores"  # "scores": a score per attribute asked; "refused": Google's refusal; "recorded"
    language: str | None = None  # the language the client names (for texts in that language)

    @property
    def asked(self) -> tuple[str, ...]:
        return tuple(self.body.get("requestedAttributes", {}))

    def content(self) -> bytes:
        return json.dumps(self.body).encode()


# --- URL joining, each client's own -------------------------------------------------------------------------------


def _node_path_join(*parts: str) -> str:
    """Node's `path.join` (POSIX): the parts joined by '/', repeated slashes collapsed, '.' and '..' resolved; a
    trailing slash of the last part kept."""
    joined = "/".join(part for part in parts if part)
    if not joined:
        return "."
    absolute, trailing = joined.startswith("/"), joined.endswith("/")
    out: list[str] = []
    for segment in joined.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if out and out[-1] != "..":
                out.pop()
            elif not absolute:
                out.append("..")
            continue
        out.append(segment)
    path = ("/" if absolute else "") + "/".join(out)
    return path + "/" if trailing and out else path or "/"


def discovery_url(base_url: str, client: str) -> str:
    """Where a client built from the discovery document fetches it: OSMod's `--endpoint`, googleapiclient's
    `discoveryServiceUrl`, and the constant of the npm client and of perspective.py, with this service's base."""
    if client not in DISCOVERY_CLIENTS:
        raise ValueError(f"{client} is not built from the discovery document")
    return base_url.rstrip("/") + DISCOVERY_PATH


def join(base_url: str, client: str, operation: str = ANALYZE, discovery: dict | None = None) -> str:
    """The URL `client` posts to, built as its source builds it from `base_url` (its endpoint setting, or what the
    one-line change puts in place of Google's host); without the key, which `Shape.key_in` says where to put.
    `discovery`: the discovery document a discovery-built client read (default: this service's, whose `rootUrl`
    is the base URL with a slash and whose `servicePath` is empty)."""
    if client == "coral":
        # new URL(endpoint.trim()); url.pathname = path.join(url.pathname, `/${operation}`); key set in the query
        # (coralproject/talk@11d3083ca5d76041f82f0b52372853bec220148f:
        # server/src/core/server/services/perspective/perspective.ts:133-135). Its query stays.
        parts = urlsplit(base_url.strip())
        return urlunsplit((parts.scheme, parts.netloc, _node_path_join(parts.path or "/", f"/{operation}"),
                           parts.query, ""))  # fmt: skip
    if client == "discourse":
        # Excon.new(GOOGLE_API_DOMAIN).request(path: ANALYZE_COMMENT_ENDPOINT): the path replaces any of the base's
        # (discourse/discourse-perspective-api@3bfaf5354f300532b72a048b9772fee086dc11ee:lib/discourse_perspective.rb:
        # 4-5, 130, 141). Only analyze is ever sent.
        parts = urlsplit(base_url)
        return urlunsplit((parts.scheme, parts.netloc, f"/v1alpha1/{operation}", "", ""))
    if client in ("defender", "browser", "n8n"):
        # A whole URL in one string whose host the change replaces: Defender's PERSPECTIVE_API_URL
        # (Twentysix26/x26-Cogs@aa2854542408cd98c4763aa503373934515dd534:defender/core/automodules.py:37), a page's
        # fetch URL (Kalmani2/Edurate@8400457889b262a9f21d6bfd5a319cc8b8d073b5:frontend/src/functions.js:7), n8n's
        # `https://commentanalyzer.googleapis.com${endpoint}` (n8n-io/n8n@0f1739655bcad9633ebb2a4d3d565d5d6a0ca108:
        # packages/nodes-base/nodes/Google/Perspective/GenericFunctions.ts:21). Plain concatenation: a trailing
        # slash in the replacement would double.
        return f"{base_url}/v1alpha1/{operation}"
    if client in DISCOVERY_CLIENTS:
        # rootUrl + servicePath + the method's path, as googleapiclient and Node's googleapis (OSMod, the npm client)
        # build it from the document.
        document = discovery or {"rootUrl": base_url.rstrip("/") + "/", "servicePath": ""}
        path = (discovery or {}).get("resources", {}).get("comments", {}).get("methods", {}).get(
            operation.split(":")[1], {}).get("path", f"v1alpha1/{operation}")  # fmt: skip
        return document["rootUrl"] + document.get("servicePath", "") + path
    raise ValueError(f"unknown client {client!r}")


DISCOVERY_CLIENTS = ("osmod", "npm", "googleapiclient", "perspective.py")
CLIENTS = ("coral", "discourse", "defender", "browser", "n8n", *DISCOVERY_CLIENTS)


# --- The shapes ------------------------------------------------------------------------------------------------------

# Benign texts per language (far from every threshold), for the shapes that name a language.
BENIGN = {
    "en": "Thank you for the lovely photos of the garden.",
    "es": "Gracias por las fotos tan bonitas del jardín.",
    "fr": "Merci pour les belles photos du jardin.",
    "de": "Vielen Dank für die schönen Fotos vom Garten.",
    "pt": "Obrigado pelas lindas fotos do jardim.",
    "it": "Grazie per le belle foto del giardino.",
    "ru": "Спасибо за прекрасные фотографии сада.",
    "ja": "庭の素敵な写真をありがとうございます。",
}

# Coral: the tenant's locale -> the language it sends (convertLanguage: en-US en, es es, fr-FR fr, de de, pt-BR pt,
# every other locale en; coralproject/talk@11d3083ca5d76041f82f0b52372853bec220148f:
# server/src/core/server/services/perspective/perspective.ts:27-42), for every locale Coral ships
# (coralproject/talk@4db506f560df63e0f1e8aa53dece135078469d63:common/lib/helpers/i18n/locales.ts:5-28).
CORAL_LOCALES = (
    "af-ZA", "ar-AE", "en-US", "pt-BR", "es", "de", "tr-TR", "hu", "id-ID", "it-IT", "ja-JP", "de-CH", "nl-NL", "da",
    "fr-FR", "ro", "fi-FI", "sv", "sk-SK", "pl", "ru", "nb-NO", "zh-CN",
)  # fmt: skip
_CORAL_LANGUAGE = {"en-US": "en", "es": "es", "fr-FR": "fr", "de": "de", "pt-BR": "pt"}


def coral_language(locale: str) -> str:
    return _CORAL_LANGUAGE.get(locale, "en")


# Coral's analyze body: formatBody's "comments:analyze" case, keys in its order; `model` is the admin's "Toxicity
# model" text field (default TOXICITY_MODEL_DEFAULT "TOXICITY"), doNotStore defaults to true (coralproject/talk@
# 11d3083ca5d76041f82f0b52372853bec220148f:server/src/core/server/services/perspective/perspective.ts:87-97;
# coralproject/talk@2f55a86db882822520afe01c1b32c6d4068127a7:
# server/src/core/server/services/comments/pipeline/phases/toxic.ts:66-99;
# coralproject/talk@48e89ddb8113f832e05e089a327992f8546e942e:common/lib/constants.ts:40-52).
def coral_analyze(locale: str, model: str = "TOXICITY", text: str | None = None) -> Shape:
    language = coral_language(locale)
    body = {"comment": {"text": text or BENIGN[language]}, "doNotStore": True, "requestedAttributes": {model: {}},
            "languages": [language]}  # fmt: skip
    return Shape("coral", f"coral-analyze-{locale}-{model}", body, language=language,
                 source="coralproject/talk@11d3083ca5d76041f82f0b52372853bec220148f:"
                        "server/src/core/server/services/perspective/perspective.ts:87-97")  # fmt: skip


# Coral's moderator decision, sent when "Allow Coral to send moderation actions" is on: formatBody's
# "comments:suggestscore" case; the attribute is the model, 0 for APPROVED and 1 for DELETED (a rejection); the
# context entry's JSON drops reply_to_id_Coral_comment_id when the comment has no parent (JSON.stringify drops
# undefined) (coralproject/talk@11d3083ca5d76041f82f0b52372853bec220148f:
# server/src/core/server/services/perspective/perspective.ts:98-124; the listener:
# coralproject/talk@4db506f560df63e0f1e8aa53dece135078469d63:server/src/core/server/events/listeners/perspective.ts:
# 21-30, 42-52).
def coral_suggest(locale: str, status: str = "DELETED", model: str = "TOXICITY", parent: str | None = None) -> Shape:
    language, comment_id = coral_language(locale), "c0ffee00-0000-4000-8000-000000000001"
    context = {"url": f"https://news.example.org/story-1?commentID={comment_id}"}
    if parent is not None:
        context["reply_to_id_Coral_comment_id"] = parent
    context["Coral_comment_id"] = comment_id
    body = {"comment": {"text": BENIGN[language]}, "context": {"entries": [{"text": json.dumps(context)}]},
            "attributeScores": {model: {"summaryScore": {"value": 0 if status == "APPROVED" else 1}}},
            "languages": [language], "communityId": "Coral:https://comments.example.org/",
            "clientToken": f"comment:{comment_id}"}  # fmt: skip
    reply = "-reply" if parent is not None else ""
    return Shape("coral", f"coral-suggest-{locale}-{status}{reply}", body, operation=SUGGEST, expect="recorded",
                 language=language, source="coralproject/talk@11d3083ca5d76041f82f0b52372853bec220148f:"
                 "server/src/core/server/services/perspective/perspective.ts:98-124")  # fmt: skip


# Older Coral (v5 and v6) named the attribute by the decision, `APPROVED` or `DELETED` with 1, and sent
# languages ["EN"] (coralproject/talk@143554fc17ac8997f3c0b0b8577fe28f8494d2f3:
# src/core/server/services/perspective/index.ts, notifyPerspectiveModerationDecision).
def coral_legacy_suggest(status: str = "DELETED") -> Shape:
    comment_id = "legacy-1"
    body = {"comment": {"text": BENIGN["en"]},
            "context": {"entries": [{"text": json.dumps({"url": f"https://news.example.org/a?commentID={comment_id}",
                                                         "Coral_comment_id": comment_id})}]},
            "attributeScores": {status: {"summaryScore": {"value": 1}}}, "languages": ["EN"],
            "communityId": "Coral:https://comments.example.org/", "clientToken": f"comment:{comment_id}"}  # fmt: skip
    return Shape("coral", f"coral-legacy-suggest-{status}", body, operation=SUGGEST, expect="recorded",
                 source="coralproject/talk@143554fc17ac8997f3c0b0b8577fe28f8494d2f3:"
                        "src/core/server/services/perspective/index.ts")  # fmt: skip


# Discourse: payload of AnalyzeComment#to_json (text cut to 20 kB, doNotStore true, sessionId "<base_url>_<user id>",
# one attribute with scoreType PROBABILITY by the `perspective_toxicity_model` setting, no languages), headers of
# score_comment (discourse/discourse-perspective-api@3bfaf5354f300532b72a048b9772fee086dc11ee:
# lib/discourse_perspective.rb:16-39, 134-141).
def discourse(model: str) -> Shape:
    attribute = {"standard": "TOXICITY", "severe toxicity (experimental)": "SEVERE_TOXICITY"}[model]
    body = {"comment": {"text": BENIGN["en"]}, "doNotStore": True, "sessionId": "https://forum.example.org_42",
            "requestedAttributes": {attribute: {"scoreType": "PROBABILITY"}}}  # fmt: skip
    headers = {"Accept": "*/*", "Content-Type": "application/json", "User-Agent": "Discourse/3.4.0"}
    return Shape("discourse", f"discourse-{attribute}", body, headers=headers,
                 source="discourse/discourse-perspective-api@3bfaf5354f300532b72a048b9772fee086dc11ee:"
                        "lib/discourse_perspective.rb:16-39")  # fmt: skip


# Defender's comment analysis: the guild's `ca_attributes` (default [SEVERE_TOXICITY]; choices: the
# PerspectiveAttributes enum) each {}, doNotStore true, no languages; aiohttp's json= sets the Content-Type
# (Twentysix26/x26-Cogs@aa2854542408cd98c4763aa503373934515dd534:defender/core/automodules.py, comment_analysis;
# Twentysix26/x26-Cogs@90e898d18921869398f3d59792aec2d126dc230a:defender/defender.py:81-85;
# Twentysix26/x26-Cogs@f2308f0b5c467c1aea006d52ad73f809367653b8:defender/enums.py:66-74).
def defender(attributes: tuple[str, ...] = ("SEVERE_TOXICITY",), expect: str = "scores") -> Shape:
    body = {"comment": {"text": BENIGN["en"]}, "requestedAttributes": {name: {} for name in attributes},
            "doNotStore": True}  # fmt: skip
    return Shape("defender", "defender-" + "-".join(attributes), body, expect=expect,
                 source="Twentysix26/x26-Cogs@aa2854542408cd98c4763aa503373934515dd534:"
                        "defender/core/automodules.py:37-38 and comment_analysis")  # fmt: skip


# OSMod's scorer: the moderator service user's `extra.attributes` (its create command's default, below, or
# `--attributes A,B`), languages ["en"], context entries of the article's and the replied-to comment's text,
# clientToken "<userAgent>_request<id>", spanAnnotations true; no dropUnsupportedAttributes
# (conversationai/conversationai-moderator@b8a5bb9e39264db1a000937094c035231ff0e7f0:
# packages/backend-api/src/pipeline/apiShim.ts:96-117, 151-161;
# conversationai/conversationai-moderator@9fc60c897bedad64ac6bb72cb2b5f9618eae7c94:
# packages/backend-api/src/commands/users/create.ts:79-108).
OSMOD_DEFAULT_ATTRIBUTES = (
    "ATTACK_ON_AUTHOR", "ATTACK_ON_COMMENTER", "INCOHERENT", "INFLAMMATORY", "OBSCENE", "OFF_TOPIC", "SPAM",
    "UNSUBSTANTIAL", "LIKELY_TO_REJECT", "TOXICITY",
)  # fmt: skip


def osmod(attributes: tuple[str, ...], expect: str = "scores", name: str = "osmod") -> Shape:
    body = {"comment": {"text": BENIGN["en"] + " I hope to visit it in the spring."},
            "context": {"entries": [{"text": "Our garden in May: the roses, the pond and the old apple tree."},
                                    {"text": "Here are this year's photos of the garden."}]},
            "requestedAttributes": {attribute: {} for attribute in attributes}, "languages": ["en"],
            "clientToken": "OsmodAssistantV0_request17", "spanAnnotations": True}  # fmt: skip
    return Shape("osmod", name, body, expect=expect, language="en",
                 source="conversationai/conversationai-moderator@b8a5bb9e39264db1a000937094c035231ff0e7f0:"
                        "packages/backend-api/src/pipeline/apiShim.ts:96-117")  # fmt: skip


# n8n's Google Perspective node: each attribute row's lower-case value upper-cased, with scoreType 'probability'
# (lower case) and the row's scoreThreshold (default 0); comment.type PLAIN_TEXT; `languages` is ONE code as a
# string (an options field: en, es, fr, de, pt, it, ru), left out when unset; OAuth2 Bearer, no key
# (n8n-io/n8n@b54a5315a363a43f1139b1c3a2dfb657d967d733:
# packages/nodes-base/nodes/Google/Perspective/GooglePerspective.node.ts:84-139, 155-202, 217-259;
# n8n-io/n8n@0f1739655bcad9633ebb2a4d3d565d5d6a0ca108:
# packages/nodes-base/nodes/Google/Perspective/GenericFunctions.ts:14-33).
N8N_ATTRIBUTES = ("identity_attack", "insult", "profanity", "severe_toxicity", "sexually_explicit", "threat",
                  "toxicity")  # the node's options but its default, 'flirtation'


def n8n(attributes: tuple[str, ...] = N8N_ATTRIBUTES, language: str | None = "it", expect: str = "scores") -> Shape:
    body = {"comment": {"type": "PLAIN_TEXT", "text": BENIGN[language or "en"]},
            "requestedAttributes": {name.upper(): {"scoreType": "probability", "scoreThreshold": 0}
                                    for name in attributes}}  # fmt: skip
    if language:
        body["languages"] = language
    return Shape("n8n", f"n8n-{language or 'none'}-{len(attributes)}", body, key_in="bearer", expect=expect,
                 language=language, headers={"Accept": "application/json", "Content-Type": "application/json"},
                 source="n8n-io/n8n@b54a5315a363a43f1139b1c3a2dfb657d967d733:"
                        "packages/nodes-base/nodes/Google/Perspective/GooglePerspective.node.ts:217-259")  # fmt: skip


# The npm `perspective-api-client` (sloria's): makeResource merges requestedAttributes (default {TOXICITY: {}}, an
# array upper-cased) and doNotStore (default true), no languages; through Node's googleapis built from its
# hard-coded discovery URL, key in the query (sloria/perspective-api-client@7d58a132077f79270e7df39b49afd49a25dff800:
# index.js:6-7, 18-34, 35-67, 80-89).
def npm(attributes: tuple[str, ...] = ("toxicity",)) -> Shape:
    body = {"comment": {"text": BENIGN["en"]}, "requestedAttributes": {name.upper(): {} for name in attributes},
            "doNotStore": True}  # fmt: skip
    return Shape("npm", "npm-" + "-".join(attributes), body,
                 source="sloria/perspective-api-client@7d58a132077f79270e7df39b49afd49a25dff800:index.js:35-67")


# google-api-python-client built from the discovery document: key and alt=json in the query (googleapiclient's
# JsonModel adds alt=json), its own Accept, User-Agent and x-goog-api-client headers; the body is the script's.
def googleapiclient(attributes: tuple[str, ...] = ("TOXICITY", "INSULT"), language: str | None = "fr") -> Shape:
    body = {"comment": {"text": BENIGN[language or "en"]},
            "requestedAttributes": {name: {} for name in attributes}}  # fmt: skip
    if language:
        body["languages"] = [language]
    headers = {"accept": "application/json", "accept-encoding": "gzip, deflate", "content-type": "application/json",
               "user-agent": "(gzip)", "x-goog-api-client": "gdcl/2.202.0 gl-python/3.11"}  # fmt: skip
    return Shape("googleapiclient", f"googleapiclient-{language}", body, query={"alt": "json"}, headers=headers,
                 language=language, source="googleapis/google-api-python-client: googleapiclient/model.py "
                                           "(JsonModel.alt_param = 'json'), discovery.py (developerKey -> key)")


# perspective.py (PyPI `perspective.py`): Client.analyze asks for Attributes.Production (the six production
# attributes) by default, `languages` [code] only when one is given, through googleapiclient built from its
# hard-coded discovery URL; it then reads attributeScores[A]['spanScores'][0]['score']['value']
# (Yilmaz4/perspective.py@575b94ee31634d3521e687f6f74d3e5e4544ea26:perspective/main.py:85-92 and Client.analyze;
# Yilmaz4/perspective.py@e789bede5579a6f0f7968cfdad7139379e2c4d21:perspective/attributes.py:16).
def perspective_py(language: str | None = "de") -> Shape:
    attributes = ("TOXICITY", "SEVERE_TOXICITY", "IDENTITY_ATTACK", "INSULT", "PROFANITY", "THREAT")
    body = {"comment": {"text": BENIGN[language or "en"]}, "requestedAttributes": {name: {} for name in attributes}}
    if language:
        body["languages"] = [language]
    return Shape("perspective.py", f"perspective.py-{language}", body, query={"alt": "json"}, language=language,
                 source="Yilmaz4/perspective.py@575b94ee31634d3521e687f6f74d3e5e4544ea26:perspective/main.py")


# A page that calls Perspective from the browser with fetch(), the key in the URL, JSON content type (so a CORS
# preflight first) (Kalmani2/Edurate@8400457889b262a9f21d6bfd5a319cc8b8d073b5:frontend/src/functions.js:7-22).
BROWSER_ORIGIN = "https://comments.example.org"


def browser(language: str = "en") -> Shape:
    body = {"comment": {"text": BENIGN[language]}, "languages": [language], "requestedAttributes": {"TOXICITY": {}}}
    return Shape("browser", f"browser-{language}", body, language=language,
                 headers={"Content-Type": "application/json", "Origin": BROWSER_ORIGIN},
                 source="Kalmani2/Edurate@8400457889b262a9f21d6bfd5a319cc8b8d073b5:frontend/src/functions.js:7-22")


# Every shape the clients send as they ship (or as their settings allow), the way each answers.
SHAPES: tuple[Shape, ...] = (
    *(coral_analyze(locale) for locale in CORAL_LOCALES),
    coral_analyze("fr-FR", model="SEVERE_TOXICITY"),
    *(coral_suggest(locale, status) for locale in ("en-US", "es", "fr-FR", "de", "pt-BR")
      for status in ("APPROVED", "DELETED")),
    coral_suggest("en-US", parent="c0ffee00-0000-4000-8000-000000000000"),
    coral_legacy_suggest("APPROVED"), coral_legacy_suggest("DELETED"),
    discourse("standard"), discourse("severe toxicity (experimental)"),
    defender(), defender(PRODUCTION_ATTRIBUTES),
    defender(("TOXICITY", "FLIRTATION"), expect="refused"),  # a guild that ticked FLIRTATION
    osmod(OSMOD_DEFAULT_ATTRIBUTES, expect="refused", name="osmod-default"),
    osmod(("TOXICITY", "SEVERE_TOXICITY", "IDENTITY_ATTACK", "INSULT", "PROFANITY", "THREAT"), name="osmod-production"),
    n8n(), n8n(language="fr"), n8n(language=None), n8n(("flirtation",), expect="refused"),
    npm(), npm(("toxicity", "severe_toxicity")),
    googleapiclient(), googleapiclient(PRODUCTION_ATTRIBUTES, language="ja"),
    perspective_py(), perspective_py(None),
    browser(),
)  # fmt: skip


def distinct_coral_languages() -> dict[str, str]:
    """One locale per language Coral sends (the other locales send the same body as en-US)."""
    return {"en": "en-US", "es": "es", "fr": "fr-FR", "de": "de", "pt": "pt-BR"}


def query_for(shape: Shape, key: str) -> dict:
    return {**shape.query, "key": key} if shape.key_in == "query" else dict(shape.query)


def headers_for(shape: Shape, key: str) -> dict:
    return {**shape.headers, "Authorization": f"Bearer {key}"} if shape.key_in == "bearer" else dict(shape.headers)
