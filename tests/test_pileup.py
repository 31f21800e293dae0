"""Nothing piles up (issue 30): what visitors' clicks leave on the server stays bounded."""
from __future__ import annotations

import glob
import os
import tempfile

from inference.config import LIMITS
from lessons.common.exports import KEPT
from visualizations.exports import export_folder, write_csv


def _export_folders() -> set[str]:
    return set(glob.glob(os.path.join(tempfile.gettempdir(), "llm-lab-export-*")))


def test_pileup_200_csv_clicks_leave_one_folder_of_bounded_files():
    before = _export_folders()
    paths = [write_csv(f"length,ms\n{i},{i * 1.5}\n", "prefill-sweep", KEPT)
             for i in range(200)]  # 200 clicks, each a different finished sweep
    new = _export_folders() - before
    assert len(new | {export_folder()} - before) <= 1, new
    folder = export_folder()
    assert all(os.path.dirname(p) == folder for p in paths)
    left = os.listdir(folder)
    assert 1 <= len(left) <= KEPT == LIMITS.export_files_kept, len(left)
    with open(paths[-1], encoding="utf-8") as f:  # the newest export is intact
        assert f.read() == "length,ms\n199,298.5\n"
    assert write_csv("same\n", "x", KEPT) == write_csv("same\n", "x", KEPT)  # no duplicates
