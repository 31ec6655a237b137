import random

import pytest

from server.engines.detokenize import IncrementalDetokenizer

TEXTS = ["Hello there, how are you?", "Привет, как дела? вчера 1 200,50 ₽",
         "emoji 🙂🙃 and 中文字符 mixed", '{"a":[1,2,{"b":"x y"}]}  spaces   kept',
         "line one\nline two\n\ttabbed"]


@pytest.mark.parametrize("text", TEXTS)
def test_incremental_text_equals_one_full_decode(tokenizer, text):
    ids = tokenizer.encode(text, add_special_tokens=False)
    def decode(chunk):
        return tokenizer.decode(chunk, skip_special_tokens=True)

    rng = random.Random(0)
    for _ in range(20):
        detok, seen, i = IncrementalDetokenizer(decode), [], 0
        while i < len(ids):
            n = rng.randint(1, 3)
            out = detok.add(ids[i:i + n])
            i += n
            assert not out.endswith("\ufffd")
            assert not seen or out.startswith(seen[-1])  # text only ever grows
            seen.append(out)
        assert seen[-1] == tokenizer.decode(ids, skip_special_tokens=True)
