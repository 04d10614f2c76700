"""Re-planning a preset onto other GPUs keeps its TP size, so the launch dialog's promise is what is launched."""

from __future__ import annotations

import itertools
import re

import pytest

from console.config import Preset
from console.sglang.command import expand_replicas
from console.ui.screens.launch import launch_gpus, target_line


def _preset(gpus: list[int], tp: int | None = None) -> Preset:
    return Preset(host="bw", gpus=gpus, tp=tp, model="/m", port=31000)


def test_a_preset_without_tp_keeps_its_group_size_on_marked_gpus() -> None:
    """qwen36-bench (gpus [0], no tp) on marked GPUs 1,3: two TP1 replicas, as the dialog says (was one TP2)."""
    reps = expand_replicas("bench", _preset([0]), [1, 3], [31021, 31022])
    assert [(r.gpus, r.tp, r.port) for r in reps] == [((1,), 1, 31021), ((3,), 1, 31022)]


def test_a_tp2_preset_without_tp_cannot_go_on_one_gpu() -> None:
    with pytest.raises(ValueError, match="does not divide"):
        expand_replicas("pair", _preset([0, 1]), [2])


@pytest.mark.parametrize("own,tp", [([0], None), ([0, 1], None), ([0, 1, 2, 3], 1), ([0, 1, 2, 3], 2), ([2, 3], None)])
def test_the_dialogs_target_line_is_what_is_planned(own: list[int], tp: int | None) -> None:
    """Every mark of 1-4 GPUs: the replica count and TP the dialog names are those of the planned replicas."""
    preset = _preset(own, tp)
    for k in range(1, 5):
        for marked in itertools.combinations(range(4), k):
            use = launch_gpus(preset, list(marked), marked=True)
            where, refused = target_line("p", preset, list(marked), marked=True)
            if use is None:
                continue
            assert refused is None
            m = re.search(r"(\d+) replicas? of TP(\d+)", where)
            assert m, where
            reps = expand_replicas("p", preset, use, list(range(31000, 31000 + len(use))))
            assert (len(reps), {r.tp for r in reps}) == (int(m[1]), {int(m[2])}), (marked, where)
