"""What is recorded from outside, pure: secrets masked (values by name, shapes anywhere, JSON
kept valid, a stream split anywhere masked whole) and lone surrogates replaced, in values and
in JSON text's escapes."""

from __future__ import annotations

import json

from store.model.json_text import repair_surrogate_escapes, without_lone_surrogates
from store.model.secret_mask import SecretMask, StreamMask, mask_value, secret_values

ENV = {"PGPASSWORD": "hunter2hunter2", "HOME": "/root", "OPENAI_API_KEY": "abcdefghijkl",
       "TETHER_DATABASE_URL": "postgresql://bob:s3cr3t-pass@db.example/prod",
       "GIT_AUTHOR_NAME": "Someone Long", "SHORT_TOKEN": "abc"}


def test_values_come_from_secret_names_and_url_passwords() -> None:
    assert set(secret_values(ENV)) == {"hunter2hunter2", "abcdefghijkl", "s3cr3t-pass"}


def test_values_and_shapes_are_masked_and_the_rest_kept() -> None:
    mask = SecretMask(secret_values(ENV))
    cases = {
        "PGPASSWORD=hunter2hunter2 HOME=/root": "PGPASSWORD=*** HOME=/root",
        "to postgresql://bob:s3cr3t-pass@db.example/prod": "to postgresql://bob:***@db.example/prod",
        "https://u:other-pw@h/x": "https://u:***@h/x",
        "Authorization: Bearer abc.def": "Authorization: Bearer ***",
        "proxy-authorization: Basic dXNlcjpw": "proxy-authorization: Basic ***",
        "X-Api-Key: k-123456": "X-Api-Key: ***",
        "host=db password=topsecret dbname=x": "host=db password=*** dbname=x",
        "key sk-ant-api03-abcdefghijklmnopqrstuvwxyz": "key ***",
        "see http://example.com/a@b and GIT_AUTHOR_NAME=Someone Long":
            "see http://example.com/a@b and GIT_AUTHOR_NAME=Someone Long",
    }
    for text, masked in cases.items():
        assert mask.mask(text) == masked, text
    assert mask.mask_bytes(b"x hunter2hunter2 y") == b"x *** y"


def test_json_values_stay_valid_json() -> None:
    mask = SecretMask(["12345678", 'quote"and\\slash'])
    value = {"n": 12345678, "s": "pin 12345678", "q": 'a quote"and\\slash b',
             "Authorization": "Bearer xyz"}
    masked = mask_value(value, mask)
    assert masked == {"n": 12345678, "s": "pin ***", "q": "a *** b",
                      "Authorization": "Bearer xyz"}
    assert mask.might_hold(json.dumps(value, ensure_ascii=False))
    masked_text = mask.mask(json.dumps({"Authorization": "Bearer xyz"}))
    assert masked_text == '{"Authorization": "Bearer ***"}'


def test_a_stream_is_masked_whole_wherever_it_is_split() -> None:
    mask = SecretMask(["hunter2hunter2"])
    stream = b"line one hunter2hunter2 more\nAuthorization: Bearer xyz123\n" + b"z" * 100
    for size in (1, 3, 7, 16, 1000):
        masker = StreamMask(mask, hold=16, tail=8)
        parts = [masker.feed(stream[i:i + size]) for i in range(0, len(stream), size)]
        out = b"".join(parts) + masker.finish()
        assert out == b"line one *** more\nAuthorization: Bearer ***\n" + b"z" * 100, size


def test_lone_surrogates_become_the_replacement_character() -> None:
    assert without_lone_surrogates({"a\ud800": ["x\udfffy", 1]}) == {"a\ufffd": ["x\ufffdy", 1]}
    assert without_lone_surrogates("fine 😀") == "fine 😀"


def test_escaped_lone_surrogates_are_repaired_and_pairs_kept() -> None:
    cases = {
        r'{"a": "x \ud800 y"}': {"a": "x \ufffd y"},
        r'{"a": "\ud83d\ude00"}': {"a": "😀"},
        r'{"a": "\\ud800"}': {"a": "\\ud800"},
        r'{"a": "\udc00\ud800"}': {"a": "\ufffd\ufffd"},
        r'{"a": "\ud800\ud800\ude00"}': {"a": "\ufffd\U00010200"},
        r'{"a": "\u0041\uD800"}': {"a": "A\ufffd"},
    }
    for text, value in cases.items():
        assert json.loads(repair_surrogate_escapes(text)) == value, text
