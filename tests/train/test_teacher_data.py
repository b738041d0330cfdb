"""Each teacher's data: its group, other groups interleaved, and the rehearsal share (no model needed)."""

from __future__ import annotations

import json

import pytest

from botpsy.train.teachers import other_groups, with_rehearsal, write_group_data


def rows(group: str, n: int) -> list[dict]:
    return [{"id": f"{group}{i}", "group": group} for i in range(n)]


def test_other_groups_interleaves_so_a_few_examples_cover_every_group():
    every = rows("device", 3) + rows("special", 2) + rows("commerce", 2)
    assert [r["id"] for r in other_groups(every, "special")] == ["device0", "commerce0", "device1", "commerce1", "device2"]


def test_with_rehearsal_adds_the_share_seeded_and_never_more_than_there_is():
    own, others = rows("special", 6), rows("device", 20)
    mixed = with_rehearsal(own, others, 0.25, seed=1)
    assert mixed[:6] == own and len(mixed) == 8 and all(r["group"] == "device" for r in mixed[6:])
    assert mixed == with_rehearsal(own, others, 0.25, seed=1) and mixed != with_rehearsal(own, others, 0.25, seed=2)
    assert len(with_rehearsal(own, rows("device", 3), 0.9, seed=0)) == 9  # all three others, no more
    assert with_rehearsal(own, others, 0.0, seed=0) == own
    with pytest.raises(ValueError, match="share in"):
        with_rehearsal(own, others, 1.0, seed=0)


def test_write_group_data_counts_the_rehearsed_examples(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows("special", 4) + rows("device", 8)))
    (data / "dev.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows("special", 1) + rows("device", 1)))
    counts = write_group_data(data, "special", tmp_path / "out", rehearsal=0.5, seed=0)
    assert counts == {"train": 8, "rehearsal": 4, "dev": 1}
    dev = [json.loads(line) for line in (tmp_path / "out" / "dev.jsonl").read_text().splitlines()]
    assert [r["group"] for r in dev] == ["special"]  # dev stays the group's own
    with pytest.raises(ValueError, match="no examples of group"):
        write_group_data(data, "commerce", tmp_path / "none")
