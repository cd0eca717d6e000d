import os
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
MODEL = REPO / "models" / "all-MiniLM-L6-v2"
DEMO = REPO / "demo" / "houseplants"


@pytest.fixture
def engine(tmp_path):
    from ragctx import Engine

    e = Engine(data_dir=str(tmp_path / "data"), model_dir=str(MODEL))
    e.ingest([str(DEMO)])
    return e


@pytest.fixture
def ragctx_bin():
    path = pathlib.Path(os.environ.get("RAGCTX_BIN", REPO / "target" / "release" / "ragctx"))
    assert path.is_file(), f"the ragctx binary is built by scripts/setup: {path}"
    return path
