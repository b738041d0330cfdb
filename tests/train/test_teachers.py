"""`botpsy teachers`: one teacher per group, the manifest, skipping finished teachers, endpoint
teachers scored through a fake OpenAI-compatible server, and clear errors for unusable teachers."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import torch

from botpsy.train.teachers import (
    EndpointTeacher,
    LocalTeacher,
    TeachersConfig,
    load_teachers,
    main,
)
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
