"""Leetspeak and spelt-out words read plain (models/text_disguise.py): what each rule undoes, and what it leaves as
written. Rules of a string function, tested on strings written here; what they do to quality is measured elsewhere
(docs/text-model.md, "Disguised words")."""

from __future__ import annotations

import pytest

from models.text_disguise import undisguised, with_undisguised


@pytest.mark.parametrize("written, plain", [
    ("W0m3n are only good for cooking.", "Women are only good for cooking."),
    ("I h4te Musl1ms.", "I hate Muslims."),
    ("They are p@rasites and fr34ks.", "They are parasites and freaks."),
    ("1mm1grants are v3rmin.", "immigrants are vermin."),  # an outer digit is read once an inner one shows a disguise
    ("Mu$lim$ are dirty animal$.", "Muslims are dirty animals."),  # a dollar after three letters
    ("what a b!tch", "what a bitch"),
    ("BL4CK people", "BLACK people"),  # a word in capitals stays in capitals
    ("0d1o i musulm@ni", "odio i musulmani"),
    ("les f3mm3s", "les femmes"),
])
def test_leet_words_are_read_as_letters(written, plain):
    assert undisguised(written) == plain


@pytest.mark.parametrize("written, plain", [
    ("W o m e n belong in the kitchen.", "Women belong in the kitchen."),
    ("Lock up all the t r a n n i e s.", "Lock up all the trannies."),
    ("K i l l them", "Kill them"),
    ("\"d i r t y\" people", "\"dirty\" people"),
])
def test_words_spelt_out_letter_by_letter_are_joined(written, plain):
    assert undisguised(written) == plain


@pytest.mark.parametrize("written, plain", [
    ("You are a stup\u200bid id\u200biot.", "You are a stupid idiot."),  # zero-width spaces
    ("what a b\u00adi\u2060tch", "what a bitch"),  # a soft hyphen and a word joiner
    ("Mu\u0455lim\u0455 are \u0440\u0430rasites.", "Muslims are parasites."),  # Cyrillic ѕ, р and а among Latin
    ("stup\u03b9d \u0399diot", "stupid Idiot"),  # Greek iota, small and capital
    ("I h4te Mu\u0455lim\u0455", "I hate Muslims"),  # look-alikes read first, then leet
    ("\u041cep\u0437\u043a\u0430\u044f \u0441\u0438\u0442\u0443\u0430\u0446\u0438\u044f",
     "\u041c\u0435\u0440\u0437\u043a\u0430\u044f \u0441\u0438\u0442\u0443\u0430\u0446\u0438\u044f"),
    # "Мepзкая": Latin e and p in a Cyrillic word are read as Cyrillic
    ("\u0414\u043c\u0438\u0442\u0440i\u0439", "\u0414\u043c\u0438\u0442\u0440\u0438\u0439"),  # "Дмитрiй"
    ("\u043f\u0438z\u0434\u0435\u0446", "\u043f\u0438\u0437\u0434\u0435\u0446"),  # a Latin z for з
])
def test_invisible_characters_and_words_of_mixed_scripts_are_read_in_one(written, plain):
    assert undisguised(written) == plain


@pytest.mark.parametrize("text", [
    "Привет, как дела? Всё хорошо.",  # a word all in Cyrillic is Russian, not a disguise
    "Τα ελληνικά είναι ωραία.",
    "iPhone-ом пользуюсь давно",  # a Latin word with a Cyrillic ending: no look-alike beside a Latin letter
    "\U0001f468\u200d\U0001f469\u200d\U0001f467 family",  # joiners hold an emoji sequence together
    "\u092e\u0947\u200d\u0930\u093e",  # and Devanagari letters
    "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645",  # and Persian ones

    "I paid $100 for 5km of road in 2024, idiot!!",  # a leading or trailing digit or sign alone
    "mail jo@example.com or read https://x.io/p4ge",  # addresses
    "thanks @m4rk, see #march4marriage",  # handles and hashtags
    "u ho@RealWizKhalifa",  # "@" before a capital: a handle run on
    "ein schlechter Witz!Grundlose Haft",  # "!" before a capital: a missing space
    "il y a un chat, a w domu",  # two single letters are words, not a spelling
    "el2erada wel 5anazeer",  # Arabic in Latin letters: 2 and a leading 5 are sounds, not leet
    "h2o, mp3, 4x4, covid19",
    "",
])
def test_what_is_not_a_disguise_is_left_as_written(text):
    assert undisguised(text) == text


def test_a_window_with_a_disguise_is_read_both_ways_and_the_others_once():
    windows = ["Have a nice day.", "You are an 1d10t."]
    assert with_undisguised(windows) == ["Have a nice day.", "You are an 1d10t.", "You are an idiot."]
    assert with_undisguised(["Have a nice day."]) == ["Have a nice day."]
