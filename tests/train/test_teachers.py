"""`botpsy teachers`: one teacher per group, the manifest, skipping finished teachers, endpoint
teachers scored through a fake OpenAI-compatible server, a teacher that reads prompts in its own
chat template, and clear errors for unusable teachers."""

from __future__ import annotations

import json
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import torch

from botpsy.chat.template import render
from botpsy.train.rollout import Sample, turn_prompts
from botpsy.train.teachers import (
    EndpointTeacher,
    LocalTeacher,
    TeachersConfig,
    chatml_messages,
    load_teachers,
    main,
)
from tests.chat.conversations import WEATHER, S, U
from tests.train.test_rollout import build_trained, chat_examples, trained_student  # noqa: F401 (fixture)

pytestmark = pytest.mark.slow


@pytest.fixture
def data_dir(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    for split, rows in (("train", chat_examples(12)), ("dev", chat_examples(4, offset=12))):
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def run_teachers(trained_student, data_dir, out, **overrides):  # noqa: F811
    settings = {"init": str(trained_student), "data": str(data_dir), "out": str(out), "groups": "device,personal", "steps": 2,
                "batch_tokens": 2048, "warmup_steps": 1, "eval_examples": 2, "eval_max_new_tokens": 8, "save_every": 2, "threads": 1}
    assert main(TeachersConfig(**{**settings, **overrides})) == 0
    return json.loads((out / "manifest.json").read_text())


def test_teachers_stage_writes_manifest_and_skips_finished(trained_student, data_dir, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "teachers"
    manifest = run_teachers(trained_student, data_dir, out, groups="device,personal,special",
                            teacher_endpoint=["special=http://127.0.0.1:9/v1"], endpoint_model="t-special")
    device, special = manifest["teachers"]["device"], manifest["teachers"]["special"]
    assert manifest["teachers"]["personal"]["path"] == str(out / "personal")
    assert device["kind"] == "local" and device["path"] == str(out / "device") and device["steps"] == 2
    assert device["dev_call"]["call_examples"] == 2 and 0 <= device["dev_call"]["exact_call_rate"] <= 1
    assert device["student_dev_call"]["call_examples"] == 2
    assert manifest["student"] == str(trained_student) and manifest["dev_eval"]["examples"] == 2
    assert json.loads((out / "device" / "meta.json").read_text())["stage"] == "teacher-device"
    rows = [json.loads(line) for line in (out / "personal" / "data" / "train.jsonl").read_text().splitlines()]
    assert len(rows) == 6 and {r["group"] for r in rows} == {"personal"}
    assert special == {"kind": "endpoint", "url": "http://127.0.0.1:9/v1", "model": "t-special", "top_k": 20,
                       "steps": None, "dev_call": None}
    weights = (out / "device" / "model.safetensors").stat().st_mtime_ns
    capsys.readouterr()
    run_teachers(trained_student, data_dir, out, groups="device,personal,special",
                 teacher_endpoint=["special=http://127.0.0.1:9/v1"], endpoint_model="t-special")
    assert capsys.readouterr().out.count("finished, skipped") == 2
    assert (out / "device" / "model.safetensors").stat().st_mtime_ns == weights


def test_rehearsal_mixes_other_groups_in_and_retrains_when_the_share_changes(trained_student, data_dir, tmp_path):  # noqa: F811
    out = tmp_path / "teachers"
    manifest = run_teachers(trained_student, data_dir, out, groups="device", rehearsal=0.5)
    device = manifest["teachers"]["device"]
    rows = [json.loads(line) for line in (out / "device" / "data" / "train.jsonl").read_text().splitlines()]
    assert [r["group"] for r in rows].count("device") == 6 and [r["group"] for r in rows].count("personal") == 6
    assert device["examples"] == {"train": 12, "rehearsal": 6, "dev": 2} and device["rehearsal"] == 0.5
    # the other groups' dev examples are scored for the teacher and the student alike
    assert device["other_dev_call"]["call_examples"] + device["other_dev_call"]["no_call_examples"] == 2
    assert device["student_other_dev_call"].keys() == device["other_dev_call"].keys()
    assert json.loads((out / "device" / "meta.json").read_text())["rehearsal"] == 0.5
    from botpsy.train.teachers import is_finished

    assert is_finished(out / "device", "device", 2, 0.5) and not is_finished(out / "device", "device", 2, 0.0)


def test_teacher_init_with_zero_steps_uses_the_checkpoint_as_is(trained_student, data_dir, tmp_path):  # noqa: F811
    manifest = run_teachers(trained_student, data_dir, tmp_path / "t", groups="personal", steps=0,
                            teacher_init=[f"personal={trained_student}"])
    assert manifest["teachers"]["personal"]["path"] == str(trained_student)
    assert not (tmp_path / "t" / "personal" / "model.safetensors").exists()
    with pytest.raises(ValueError, match="GROUP=VALUE"):
        run_teachers(trained_student, data_dir, tmp_path / "t", teacher_init=["personal"])
    with pytest.raises(ValueError, match="not one of --groups"):
        run_teachers(trained_student, data_dir, tmp_path / "t", teacher_init=[f"commerce={trained_student}"])


# A base model's own template: plain ChatML with a default system prompt, no think blocks.
BASE_TEMPLATE = ("{% if messages[0]['role'] != 'system' %}<|im_start|>system\nYou are a base model.<|im_end|>\n{% endif %}"
                 "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                 "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def test_chatml_messages_reads_back_thinking_off_prompts_and_refuses_the_rest():
    messages = [S("Be brief."), U("Name a colour."), {"role": "assistant", "content": "Blue."}, U("Another, in capitals.")]
    prompt = render(messages, [], add_generation_prompt=True, enable_thinking=False)
    assert chatml_messages(prompt) == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a colour."},
                                       {"role": "assistant", "content": "Blue."}, {"role": "user", "content": "Another, in capitals."}]
    with pytest.raises(ValueError, match="thinking off"):
        chatml_messages(render(messages[:2], [], add_generation_prompt=True, enable_thinking=True))
    with pytest.raises(ValueError, match="without tools"):
        chatml_messages(render(messages[:2], [WEATHER], add_generation_prompt=True, enable_thinking=False))
    with pytest.raises(ValueError, match="not a ChatML turn"):
        chatml_messages("<|im_start|>user Hi<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_an_own_template_teacher_scores_the_students_tokens_after_its_own_prompt(trained_student, tmp_path):  # noqa: F811
    from botpsy.model.checkpoint import load_checkpoint

    ckpt = load_checkpoint(trained_student)
    ckpt.tokenizer.chat_template = BASE_TEMPLATE
    tokenizer = ckpt.tokenizer
    prompt = turn_prompts({"thinking": False, "messages": [U("weather in Oslo?"), {"role": "assistant", "content": "Cold."}], "tools": []})[0]
    own_text = "<|im_start|>system\nYou are a base model.<|im_end|>\n<|im_start|>user\nweather in Oslo?<|im_end|>\n<|im_start|>assistant\n"
    encode = lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]
    completion = encode("Cold.<|im_end|>")
    sample = Sample(prompt_ids=encode(prompt), completion_ids=completion, text="Cold.", finished=True)
    own = LocalTeacher("general", "x", ckpt.model, tokenizer, own_template=True)
    plain = LocalTeacher("general", "x", ckpt.model, tokenizer)
    assert own.own_prompt_ids(sample.prompt_ids) == encode(own_text)
    scored = own.score([sample], tokenizer.pad_token_id).logprobs
    expected = plain.score([Sample(encode(own_text), completion, "Cold.", True)], tokenizer.pad_token_id).logprobs
    in_botpsy = plain.score([sample], tokenizer.pad_token_id).logprobs
    assert scored.shape == in_botpsy.shape == (1, len(completion), scored.shape[-1])
    assert torch.allclose(scored, expected, atol=1e-5) and not torch.allclose(scored, in_botpsy, atol=1e-3)


def test_own_template_teachers_in_the_stage_and_the_manifest(trained_student, data_dir, tmp_path, tiny_tokenizer):  # noqa: F811
    manifest = run_teachers(trained_student, data_dir, tmp_path / "t", groups="personal", steps=0,
                            teacher_init=[f"personal={trained_student}"], own_template=["personal"])
    assert manifest["teachers"]["personal"]["template"] == "own"
    with pytest.raises(ValueError, match="needs --steps 0|give --steps 0"):
        run_teachers(trained_student, data_dir, tmp_path / "t2", groups="personal", own_template=["personal"])
    with pytest.raises(ValueError, match="--own-template"):
        run_teachers(trained_student, data_dir, tmp_path / "t2", groups="personal", steps=0, own_template=["device"])
    record = {"kind": "local", "path": str(trained_student), "template": "own"}
    teachers = load_teachers(write_manifest(tmp_path / "m.json", {"device": record}), ["device"], tiny_tokenizer, len(tiny_tokenizer))
    assert teachers["device"].own_template
    # a teacher whose tokenizer has no chat template cannot read prompts in its own one
    bare = tmp_path / "bare"
    shutil.copytree(trained_student, bare)
    settings = json.loads((bare / "tokenizer_config.json").read_text())
    settings.pop("chat_template", None)
    (bare / "tokenizer_config.json").write_text(json.dumps(settings))
    (bare / "chat_template.jinja").unlink(missing_ok=True)
    with pytest.raises(ValueError, match="has no chat template"):
        load_teachers(write_manifest(tmp_path / "m.json", {"device": {**record, "path": str(bare)}}), ["device"],
                      tiny_tokenizer, len(tiny_tokenizer))
    with pytest.raises(ValueError, match="neither 'botpsy' nor 'own'"):
        load_teachers(write_manifest(tmp_path / "m.json", {"device": {**record, "template": "chatml"}}), ["device"],
                      tiny_tokenizer, len(tiny_tokenizer))


def write_manifest(path, teachers: dict):
    path.write_text(json.dumps({"stage": "teachers", "teachers": teachers}))
    return path


def test_unusable_teachers_are_clear_errors(trained_student, tiny_tokenizer, tmp_path):  # noqa: F811
    from botpsy.model.checkpoint import save_checkpoint
    from botpsy.model.tokenizer import train_tokenizer
    from tests.conftest import SAMPLE_TEXTS

    local = {"kind": "local", "path": str(trained_student)}
    manifest = write_manifest(tmp_path / "m.json", {"device": local})
    with pytest.raises(ValueError, match=r"no teacher for group\(s\) \['personal'\]"):
        load_teachers(manifest, ["device", "personal"], tiny_tokenizer, len(tiny_tokenizer))
    other_tokenizer = train_tokenizer(SAMPLE_TEXTS[::2], vocab_size=300)
    save_checkpoint(build_trained(other_tokenizer, steps=1), other_tokenizer, tmp_path / "other", stage="sft")
    manifest = write_manifest(tmp_path / "m2.json", {"device": local, "personal": {"kind": "local", "path": str(tmp_path / "other")}})
    with pytest.raises(ValueError, match="personal teacher .* different tokenizer"):
        load_teachers(manifest, ["device", "personal"], tiny_tokenizer, len(tiny_tokenizer))
    with pytest.raises(FileNotFoundError, match="botpsy teachers"):
        load_teachers(tmp_path / "none.json", ["device"], tiny_tokenizer, len(tiny_tokenizer))


class FakeCompletions(BaseHTTPRequestHandler):
    """A tiny vLLM stand-in: /v1/completions with echo=True, logprobs=K scores the prompt ids with a local model."""

    model = tokenizer = None
    as_text = False
    lock = threading.Lock()

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        assert self.path == "/v1/completions" and body["echo"] is True and body["max_tokens"] == 1
        ids = body["prompt"]
        with self.lock, torch.no_grad():
            logprobs = torch.log_softmax(self.model(torch.tensor([ids])).logits[0].float(), -1)
        top = [None]
        for position in range(1, len(ids)):
            values, tokens = logprobs[position - 1].topk(body["logprobs"])
            name = (lambda t: self.tokenizer.decode([t])) if self.as_text else (lambda t: f"token_id:{t}")
            top.append({name(int(t)): float(v) for t, v in zip(tokens, values)})
        top.append({"token_id:0": -1.0})  # the one generated token, which the client must ignore
        reply = json.dumps({"choices": [{"text": "", "logprobs": {"top_logprobs": top}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


@pytest.fixture
def fake_server(trained_student):  # noqa: F811
    from botpsy.model.checkpoint import load_checkpoint

    ckpt = load_checkpoint(trained_student)
    FakeCompletions.model, FakeCompletions.tokenizer = ckpt.model.eval(), ckpt.tokenizer
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeCompletions)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", ckpt
    server.shutdown()
    FakeCompletions.as_text = False


def test_endpoint_teacher_returns_the_servers_top_k(fake_server):
    from botpsy.train.rollout import first_turn_prompt, sample_batch

    url, ckpt = fake_server
    samples = sample_batch(ckpt.model, ckpt.tokenizer, [first_turn_prompt(e) for e in chat_examples(3)], max_new_tokens=5, seed=1)
    teacher = EndpointTeacher("device", url, ckpt.tokenizer, model="t", top_k=4)
    sparse = teacher.score(samples, ckpt.tokenizer.pad_token_id)
    dense = LocalTeacher("device", "local", ckpt.model, ckpt.tokenizer).score(samples, ckpt.tokenizer.pad_token_id)
    steps = max(len(s.completion_ids) for s in samples)
    assert sparse.sparse and sparse.ids.shape == (3, steps, 4)
    for row, s in enumerate(samples):
        n = len(s.completion_ids)
        values, tokens = dense.logprobs[row, :n].topk(4)
        assert torch.equal(sparse.ids[row, :n], tokens)
        assert torch.allclose(sparse.logprobs[row, :n], values, atol=1e-4)
        assert sparse.valid[row, :n].all() and not sparse.valid[row, n:].any()


def test_endpoint_teacher_maps_token_texts_and_reports_failures(fake_server, tiny_tokenizer):
    from botpsy.train.rollout import Sample

    url, _ = fake_server
    FakeCompletions.as_text = True
    ids = tiny_tokenizer("Set an alarm for 7:30 tomorrow")["input_ids"]
    sample = Sample(prompt_ids=ids[:4], completion_ids=ids[4:], text="", finished=False)
    scores = EndpointTeacher("device", url, tiny_tokenizer, top_k=5).score([sample], tiny_tokenizer.pad_token_id)
    mapped = scores.ids[scores.valid]
    assert mapped.numel() > 0  # texts that are one token map back to their ids
    for token in mapped.tolist():
        assert tiny_tokenizer.encode(tiny_tokenizer.decode([token]), add_special_tokens=False) == [token]
    with pytest.raises(ValueError, match="teacher endpoint http://127.0.0.1:9/v1 .*failed"):
        EndpointTeacher("device", "http://127.0.0.1:9/v1", tiny_tokenizer, timeout=5).score([sample], 0)
