"""MOPD: the divergences, the loss masks, a few distillation steps that move the student toward
its teacher, exact resume, and the dry-run / error paths."""

from __future__ import annotations

import json
import math

import pytest
import torch

from botpsy.train.mopd import (
    MOPDConfig,
    generalized_jsd,
    main,
    manifest_scores,
    mopd_loss,
    reverse_kl,
    token_divergence,
)
from botpsy.train.teachers import TeacherScores
from tests.train.test_rollout import build_trained, chat_examples, trained_student  # noqa: F401 (fixture)

# --------------------------------------------------------------------------- scores from the teachers stage (fast)


def test_manifest_scores_are_reused_only_when_taken_the_same_way(tmp_path):
    score = {"first_turn_rate": 0.5, "call_examples": 24}
    manifest = {"student": str(tmp_path / "sft"), "dev_eval": {"examples": 24, "max_new_tokens": 160},
                "teachers": {"device": {"dev_call": score, "student_dev_call": score},
                             "personal": {"dev_call": score, "student_dev_call": score}}}
    same = MOPDConfig(student=str(tmp_path / "sft"), eval_examples=24, eval_max_new_tokens=160)
    assert manifest_scores(manifest, same, "student_dev_call", ["device", "personal"]) == {"device": score, "personal": score}
    assert manifest_scores(manifest, same, "dev_call", ["device"]) == {"device": score}
    # Another student, other settings, a missing score or an old manifest: generate them again.
    assert manifest_scores(manifest, MOPDConfig(student=str(tmp_path / "other"), eval_examples=24,
                                                eval_max_new_tokens=160), "student_dev_call", ["device"]) is None
    assert manifest_scores(manifest, MOPDConfig(student=str(tmp_path / "other"), eval_examples=24,
                                                eval_max_new_tokens=160), "dev_call", ["device"]) == {"device": score}
    assert manifest_scores(manifest, MOPDConfig(student=same.student, eval_examples=8, eval_max_new_tokens=160),
                           "dev_call", ["device"]) is None
    assert manifest_scores(manifest, same, "dev_call", ["device", "commerce"]) is None
    assert manifest_scores({k: v for k, v in manifest.items() if k != "dev_eval"}, same, "dev_call", ["device"]) is None


# --------------------------------------------------------------------------- divergences (fast)


def logp(*rows):
    return torch.log(torch.tensor(rows, dtype=torch.float32))


def test_reverse_kl_by_hand():
    p = logp([0.7, 0.2, 0.1])
    assert torch.allclose(reverse_kl(p, p), torch.zeros(1), atol=1e-7)
    q = logp([0.2, 0.5, 0.3])
    expected = 0.7 * math.log(0.7 / 0.2) + 0.2 * math.log(0.2 / 0.5) + 0.1 * math.log(0.1 / 0.3)
    assert float(reverse_kl(p, q)[0]) == pytest.approx(expected, rel=1e-5)
    assert float(reverse_kl(q, p)[0]) > 0 and float(reverse_kl(q, p)[0]) != pytest.approx(expected)


def test_jsd_symmetric_at_half_and_bounded():
    p, q = logp([0.7, 0.2, 0.1]), logp([0.2, 0.5, 0.3])
    assert torch.allclose(generalized_jsd(p, p), torch.zeros(1), atol=1e-7)
    assert torch.allclose(generalized_jsd(p, q, 0.5), generalized_jsd(q, p, 0.5))
    m = (torch.tensor([0.7, 0.2, 0.1]) + torch.tensor([0.2, 0.5, 0.3])) / 2
    expected = 0.5 * float((p.exp() * (p - m.log())).sum()) + 0.5 * float((q.exp() * (q - m.log())).sum())
    assert float(generalized_jsd(p, q, 0.5)[0]) == pytest.approx(expected, rel=1e-5)
    assert 0 < float(generalized_jsd(p, q, 0.9)[0]) < math.log(2)
    assert not torch.allclose(generalized_jsd(p, q, 0.9), generalized_jsd(q, p, 0.9))
    with pytest.raises(ValueError, match="strictly between"):
        generalized_jsd(p, q, 1.0)


@pytest.mark.parametrize("divergence", ["reverse_kl", "jsd"])
def test_gradients_reach_only_the_student(divergence):
    student = torch.randn(2, 3, 7, requires_grad=True)
    teacher = torch.randn(2, 3, 7, requires_grad=True)
    scores = TeacherScores(logprobs=torch.log_softmax(teacher, -1))
    token_divergence(student, scores, divergence).sum().backward()
    assert student.grad is not None and student.grad.abs().sum() > 0
    assert teacher.grad is None


def test_sparse_top_k_covering_the_vocabulary_equals_dense():
    torch.manual_seed(0)
    student, teacher = torch.randn(2, 3, 6), torch.log_softmax(torch.randn(2, 3, 6), -1)
    dense = token_divergence(student, TeacherScores(logprobs=teacher))
    values, ids = teacher.topk(6)
    full = TeacherScores(logprobs=values, ids=ids, valid=torch.ones_like(ids, dtype=torch.bool))
    assert torch.allclose(token_divergence(student, full), dense, atol=1e-5)
    top2 = TeacherScores(logprobs=values[..., :2], ids=ids[..., :2], valid=torch.ones_like(ids[..., :2], dtype=torch.bool))
    coarse = token_divergence(student, top2)
    assert torch.all(coarse <= dense + 1e-6) and torch.all(coarse >= 0)  # coarse-graining never increases a KL


# --------------------------------------------------------------------------- the stage (builds models)


@pytest.fixture(scope="module")
def teacher_path(tmp_path_factory, tiny_tokenizer):
    from botpsy.model.checkpoint import save_checkpoint

    path = tmp_path_factory.mktemp("mopd") / "teacher"
    save_checkpoint(build_trained(tiny_tokenizer, seed=1, steps=16), tiny_tokenizer, path, stage="teacher-device")
    return path


@pytest.fixture
def run_dir(tmp_path, teacher_path, trained_student):  # noqa: F811
    data = tmp_path / "data"
    data.mkdir()
    for split, rows in (("train", chat_examples(12)), ("dev", chat_examples(4, offset=12))):
        (data / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    teacher = {"kind": "local", "path": str(teacher_path), "steps": 16,
               "dev_call": None}
    (tmp_path / "manifest.json").write_text(json.dumps({"teachers": {"device": teacher, "personal": teacher}}))
    return tmp_path


def config(run_dir, trained_student, **overrides):  # noqa: F811
    settings = {"student": str(trained_student), "teachers": str(run_dir / "manifest.json"), "data": str(run_dir / "data"),
                "out": str(run_dir / "mopd"), "groups": "device,personal", "steps": 4, "prompts_per_step": 4, "max_new_tokens": 8,
                "lr": 3e-3, "warmup_steps": 1, "eval_examples": 2, "eval_max_new_tokens": 8, "save_every": 2, "threads": 1}
    return MOPDConfig(**{**settings, **overrides})


def kl_on_fixed_samples(model, teacher, samples, pad_id) -> float:
    from botpsy.train.teachers import LocalTeacher

    with torch.no_grad():
        loss, _ = mopd_loss(model, samples, ["device"] * len(samples), {"device": LocalTeacher("device", "", teacher, None)},
                            pad_id, "reverse_kl", 0.5)
    return float(loss)


@pytest.mark.slow
def test_distillation_moves_the_student_toward_its_teacher(run_dir, trained_student, teacher_path):  # noqa: F811
    from botpsy.model.checkpoint import load_checkpoint
    from botpsy.train.rollout import first_turn_prompt, sample_batch

    assert main(config(run_dir, trained_student)) == 0
    before, after = load_checkpoint(trained_student), load_checkpoint(run_dir / "mopd")
    teacher = load_checkpoint(teacher_path).model
    pad = before.tokenizer.pad_token_id
    samples = sample_batch(before.model, before.tokenizer, [first_turn_prompt(e) for e in chat_examples(6)], max_new_tokens=8, seed=5)
    assert kl_on_fixed_samples(after.model, teacher, samples, pad) < kl_on_fixed_samples(before.model, teacher, samples, pad)
    changed = [n for (n, p), (_, q) in zip(before.model.state_dict().items(), after.model.state_dict().items()) if not torch.equal(p, q)]
    assert changed
    curves = [json.loads(line) for line in (run_dir / "mopd" / "curves.jsonl").read_text().splitlines()]
    steps = [c for c in curves if "loss" in c]
    assert [c["step"] for c in steps] == [1, 2, 3, 4]
    assert set(steps[0]["kl"]) == {"device", "personal"} and 0 <= steps[0]["finished_share"] <= 1
    assert 1 <= steps[0]["completion_tokens_mean"] <= 8
    meta = json.loads((run_dir / "mopd" / "meta.json").read_text())
    assert after.meta["stage"] == "mopd" and meta["steps"] == 4
    for group in ("device", "personal"):
        entry = meta["groups"][group]
        assert {"student_initial", "student", "teacher", "gap_closed"} <= set(entry)
        assert entry["teacher"]["call_examples"] == entry["student"]["call_examples"] == 2


@pytest.mark.slow
def test_prompt_and_padding_tokens_carry_no_loss(trained_student, teacher_path):  # noqa: F811
    from botpsy.model.checkpoint import load_checkpoint
    from botpsy.train.rollout import first_turn_prompt, sample_batch
    from botpsy.train.teachers import LocalTeacher

    student, teacher = load_checkpoint(trained_student), load_checkpoint(teacher_path)
    tok, pad = student.tokenizer, student.tokenizer.pad_token_id
    samples = sample_batch(student.model, tok, [first_turn_prompt(e) for e in chat_examples(3)], max_new_tokens=6, seed=2)
    samples[1].completion_ids = samples[1].completion_ids[:2]  # unequal lengths: padding in the batch
    teachers = {"device": LocalTeacher("device", "", teacher.model, tok)}
    with torch.no_grad():
        batched, _ = mopd_loss(student.model, samples, ["device"] * 3, teachers, pad, "reverse_kl", 0.5)
        # Each sample alone, with no padding: the token-weighted mean must match.
        total, tokens = 0.0, 0
        for s in samples:
            loss, _ = mopd_loss(student.model, [s], ["device"], teachers, pad, "reverse_kl", 0.5)
            total, tokens = total + float(loss) * len(s.completion_ids), tokens + len(s.completion_ids)
    assert float(batched) == pytest.approx(total / tokens, rel=1e-4)
    # Gradients at prompt positions come only through the completion: the loss of an empty completion is 0.
    empty = [type(samples[0])(prompt_ids=samples[0].prompt_ids, completion_ids=[], text="", finished=False)]
    with torch.no_grad():
        loss, _ = mopd_loss(student.model, empty, ["device"], teachers, pad, "reverse_kl", 0.5)
    assert float(loss) == 0.0


def test_scoring_in_passes_gives_the_one_pass_gradient(trained_student, teacher_path):  # noqa: F811
    from botpsy.model.checkpoint import load_checkpoint
    from botpsy.train.mopd import mopd_backward
    from botpsy.train.rollout import first_turn_prompt, sample_batch
    from botpsy.train.teachers import LocalTeacher

    student, teacher = load_checkpoint(trained_student), load_checkpoint(teacher_path)
    tok, pad = student.tokenizer, student.tokenizer.pad_token_id
    samples = sample_batch(student.model, tok, [first_turn_prompt(e) for e in chat_examples(5)], max_new_tokens=6, seed=3)
    samples[2].completion_ids = samples[2].completion_ids[:2]
    groups = ["device", "personal", "device", "personal", "device"]
    teachers = {g: LocalTeacher(g, "", teacher.model, tok) for g in ("device", "personal")}

    def gradient(score_batch, detach_prompt=False):
        student.model.zero_grad(set_to_none=True)
        # The whole sequence carries gradient, so passes change nothing. The tiny model is hybrid:
        # --detach-prompt falls back to the ordinary pass (a recurrent layer's cache is updated in place).
        settings = MOPDConfig(score_batch=score_batch, detach_prompt=detach_prompt)
        loss, kl = mopd_backward(student.model, samples, groups, teachers, pad, settings, lambda part: part.backward())
        return loss, kl, torch.cat([p.grad.flatten() for p in student.model.parameters() if p.grad is not None])

    one_loss, one_kl, one_grad = gradient(0)
    for size, detach in ((1, False), (2, False), (0, True), (2, True)):
        loss, kl, grad = gradient(size, detach)
        assert loss == pytest.approx(one_loss, rel=1e-4)
        assert kl == pytest.approx(one_kl, rel=1e-4)
        assert torch.allclose(grad, one_grad, rtol=1e-3, atol=1e-6)


def test_the_anchor_term_is_the_kl_to_the_starting_student(trained_student, teacher_path):  # noqa: F811
    """--anchor: W x KL(student || its start) is added on the same tokens; zero while the student is its start."""
    from botpsy.model.checkpoint import load_checkpoint
    from botpsy.train.rollout import first_turn_prompt, sample_batch
    from botpsy.train.teachers import LocalTeacher

    student, teacher, start = (load_checkpoint(p) for p in (trained_student, teacher_path, trained_student))
    tok, pad = student.tokenizer, student.tokenizer.pad_token_id
    samples = sample_batch(student.model, tok, [first_turn_prompt(e) for e in chat_examples(3)], max_new_tokens=6, seed=4)
    teachers = {"device": LocalTeacher("device", "", teacher.model, tok)}
    anchor = LocalTeacher("anchor", "", start.model, tok)
    with torch.no_grad():
        plain, plain_kl = mopd_loss(student.model, samples, ["device"] * 3, teachers, pad, "reverse_kl", 0.5)
        same, same_kl = mopd_loss(student.model, samples, ["device"] * 3, teachers, pad, "reverse_kl", 0.5,
                                  anchor=anchor, anchor_weight=2.0)
        moved, moved_kl = mopd_loss(teacher.model, samples, ["device"] * 3, teachers, pad, "reverse_kl", 0.5,
                                    anchor=anchor, anchor_weight=2.0)  # a student that has moved (to its teacher)
        to_teacher, _ = mopd_loss(teacher.model, samples, ["device"] * 3, teachers, pad, "reverse_kl", 0.5)
    assert "anchor" not in plain_kl and same_kl["anchor"] == pytest.approx(0.0, abs=1e-6)
    assert float(same) == pytest.approx(float(plain), rel=1e-5)
    assert moved_kl["anchor"] > 0.01 and float(moved) == pytest.approx(float(to_teacher) + 2.0 * moved_kl["anchor"], rel=1e-4)


@pytest.mark.slow
def test_a_run_with_an_anchor_logs_its_kl(run_dir, trained_student):  # noqa: F811
    assert main(config(run_dir, trained_student, anchor=0.5, steps=2)) == 0
    steps = [json.loads(line) for line in (run_dir / "mopd" / "curves.jsonl").read_text().splitlines()]
    kls = [c["kl"]["anchor"] for c in steps if "loss" in c]
    assert len(kls) == 2 and kls[0] == pytest.approx(0.0, abs=1e-6) and kls[1] > 0  # the first step starts at the anchor


@pytest.mark.slow
def test_killed_run_resumes_to_identical_weights(run_dir, trained_student, tmp_path):  # noqa: F811
    from botpsy.model.checkpoint import load_checkpoint

    assert main(config(run_dir, trained_student, out=str(tmp_path / "straight"), eval_examples=0)) == 0
    resumed = tmp_path / "resumed"
    assert main(config(run_dir, trained_student, out=str(resumed), eval_examples=0, interrupt_after=3)) == 0
    assert not (resumed / "model.safetensors").exists()  # killed after step 3; state saved at step 2
    assert main(config(run_dir, trained_student, out=str(resumed), eval_examples=0)) == 0
    a, b = load_checkpoint(tmp_path / "straight").model.state_dict(), load_checkpoint(resumed).model.state_dict()
    for name in a:
        assert torch.equal(a[name], b[name]), name
    steps = [json.loads(line)["step"] for line in (resumed / "curves.jsonl").read_text().splitlines() if "loss" in line]
    assert steps == [1, 2, 3, 4]


@pytest.mark.slow
def test_errors_and_dry_run(run_dir, trained_student, capsys):  # noqa: F811
    from tests.chat.official_template import REPO

    with pytest.raises(ValueError, match=r"no teacher for group\(s\) \['commerce'\]"):
        main(config(run_dir, trained_student, groups="device,commerce"))
    with pytest.raises(ValueError, match="jsd-beta"):
        main(config(run_dir, trained_student, divergence="jsd", jsd_beta=0.0))
    with pytest.raises(ValueError, match="weight sync"):
        main(config(run_dir, trained_student, rollout_endpoint="http://127.0.0.1:9/v1"))
    with pytest.raises(ValueError, match="not an http"):
        main(config(run_dir, trained_student, rollout_endpoint="vllm-box:8000", dry_run=True))
    capsys.readouterr()
    assert main(config(run_dir, trained_student, rollout_endpoint="http://127.0.0.1:9/v1", dry_run=True, json=True,
                       accelerate_config=str(REPO / "configs/accelerate/zero2.yaml"))) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["rollout_endpoint"]["reachable"] is False and plan["teachers"]["device"]["kind"] == "local"
    assert plan["prompt_pool"]["device"] > 0 and plan["launch_plan"]["distributed_type"] == "DEEPSPEED"
    assert plan["launch_plan"]["launch"].startswith("accelerate launch --config_file")
    assert not (run_dir / "mopd").exists()
