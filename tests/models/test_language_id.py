"""The language detector on hand-written texts: plumbing (is it installed, loaded, answering codes), not evidence of
its accuracy (that is measured on real comments by `make eval-text`, docs/text-model.md)."""

from __future__ import annotations

import pytest

from models import language_id

TEXTS = {
    "en": ["Thank you for the lovely article, it was very helpful.",
           "You are a worthless idiot and everyone hates you."],
    "de": ["Vielen Dank für den schönen Artikel, er war sehr hilfreich.", "Du bist so ein Idiot, halt die Klappe."],
    "es": ["Gracias por el artículo, me ha resultado muy útil.", "Eres un idiota y nadie te quiere."],
    "pt": ["Obrigado pelo artigo, foi muito útil para mim.", "Você é um idiota e ninguém gosta de você."],
    "tr": ["Bugün hava çok güzel, teşekkür ederim.", "Sen tam bir aptalsın, kimse seni sevmiyor."],
    "ar": ["شكرا لك على هذا المقال الرائع والمفيد", "أنت غبي ولا أحد يحبك"],
    "zh": ["今天天气很好，谢谢你的文章。", "你是个白痴，没有人喜欢你。"],
    "ko": ["오늘 날씨가 정말 좋네요, 감사합니다.", "너는 정말 바보야, 아무도 너를 좋아하지 않아."],
    "da": ["Tak for en dejlig aften, vi ses i morgen.", "Du er en idiot, og ingen kan lide dig."],
    "ru": ["Спасибо за интересную статью, очень полезно.", "Ты полный идиот, тебя никто не любит."],
}


@pytest.mark.parametrize("language", sorted(TEXTS))
def test_each_language_with_dev_data_is_detected_on_plain_sentences(language):
    for text in TEXTS[language]:
        assert language_id.language_of(text) == language, text


def test_detect_lists_likely_languages_likeliest_first_with_probabilities():
    found = language_id.detect("شكرا لك على هذا المقال الرائع")
    assert found[0][0] == "ar" and len(found) <= language_id.MAX_LANGUAGES
    probabilities = [p for _, p in found]
    assert probabilities == sorted(probabilities, reverse=True)
    assert all(language_id.MIN_PROBABILITY <= p <= 1 for p in probabilities)


@pytest.mark.parametrize("text", ["", "   \n", "x", "lol"])
def test_blank_or_languageless_text_has_no_language(text):
    assert language_id.detect(text) == [] and language_id.language_of(text) is None
