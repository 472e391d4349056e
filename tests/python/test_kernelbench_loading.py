"""Loading problems and candidates as KernelBench's eval.py does."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")

from conftest import candidate, problem  # noqa: E402
from kcv.kernelbench import (  # noqa: E402
    LoadError,
    detect_backend,
    load_candidate,
    load_problem,
    override_constants,
    read_source,
    size_constants,
)

pytestmark = pytest.mark.usefixtures("strict_flags")

SOURCE = """import torch
N = 2048 * 2   # a comment that must survive
batch_size = 16
dim = 1000
input_shape = (dim,)
scale = 0.5
flag = True
neg = -3

def get_inputs():
    return [torch.rand(batch_size, *input_shape)]
"""


def test_size_constants_are_the_integer_constant_expressions():
    assert size_constants(SOURCE) == {"N": 4096, "batch_size": 16, "dim": 1000, "neg": -3}


def test_override_rewrites_only_the_values_and_derived_constants_follow():
    text = override_constants(SOURCE, {"dim": 17, "N": 5})
    assert "N = 5   # a comment that must survive" in text
    assert "dim = 17\n" in text
    assert text.replace("N = 5", "N = 2048 * 2").replace("dim = 17", "dim = 1000") == SOURCE
    ctx: dict = {}
    exec(text, ctx)
    assert ctx["input_shape"] == (17,)
    assert ctx["get_inputs"]()[0].shape == (16, 17)


CHAINED = """import torch
batch_size = 4
height = width = 8 * 4  # square images
def get_inputs():
    return [torch.rand(batch_size, 3, height, width)]
"""


def test_a_chained_assignment_gives_each_name_its_own_size_constant():
    assert size_constants(CHAINED) == {"batch_size": 4, "height": 32, "width": 32}
    one = override_constants(CHAINED, {"height": 5})
    assert "height = 5; width = 8 * 4  # square images\n" in one
    both = override_constants(CHAINED, {"width": 7, "height": 5, "batch_size": 2})
    assert "height = 5; width = 7  # square images\n" in both
    ctx: dict = {}
    exec(both, ctx)
    assert ctx["get_inputs"]()[0].shape == (2, 3, 5, 7)
    assert override_constants(CHAINED, {"batch_size": 1}).replace("batch_size = 1", "batch_size = 4") == CHAINED


UNPACKED = """import torch
batch_size = 4
depth, height, width = 2, 8 * 4, (16)  # volumes
channels, name = 3, "rgb"
def get_inputs():
    return [torch.rand(batch_size, channels, depth, height, width)]
"""


def test_an_unpacking_assignment_gives_each_name_its_own_size_constant():
    # 50 of the 222 problems of the two audited corpora write their sizes this way; read as one
    # statement they were not size constants, so the probe budget left them at full size.
    assert size_constants(UNPACKED) == {"batch_size": 4, "depth": 2, "height": 32, "width": 16}
    one = override_constants(UNPACKED, {"height": 5})
    assert "depth = 2; height = 5; width = 16  # volumes\n" in one
    ctx: dict = {}
    exec(override_constants(UNPACKED, {"width": 7, "depth": 1, "batch_size": 2}), ctx)
    assert ctx["get_inputs"]()[0].shape == (2, 3, 1, 32, 7)
    # A tuple with a value that is not an integer constant binds no size constant.
    with pytest.raises(KeyError, match="channels"):
        override_constants(UNPACKED, {"channels": 1})


def test_override_of_an_unknown_constant_is_an_error():
    with pytest.raises(KeyError, match="scale"):
        override_constants(SOURCE, {"scale": 2})


def test_load_problem_with_overrides_changes_get_inputs():
    p = load_problem(read_source(problem("matmul")), str(problem("matmul")), {"M": 3, "N": 5})
    a, b = p.get_inputs()
    assert a.shape == (3, 256) and b.shape == (256, 5)
    assert p.overrides == {"M": 3, "N": 5}


def test_cuda_path_execs_into_the_shared_context(tmp_path):
    p = load_problem(read_source(problem("matmul")), "matmul.py")
    src = "K_SEEN = K\nclass ModelNew(Model):\n    pass\n"
    c = load_candidate(src, "cand.py", p.context, str(tmp_path / "build"), backend="cuda")
    assert c.backend == "cuda" and c.tempfile is None
    assert p.context["K_SEEN"] == 256                       # the candidate saw the problem's names
    assert issubclass(c.cls, p.Model) and c.cls is p.context["ModelNew"]
    assert os.environ["TORCH_EXTENSIONS_DIR"] == str(tmp_path / "build")
    assert p.context["BUILD_DIRECTORY"] == str(tmp_path / "build")


def test_model_is_the_fallback_only_when_the_candidate_defines_it(tmp_path):
    p = load_problem(read_source(problem("matmul")), "matmul.py")
    problems_model = p.Model
    own = load_candidate("import torch\nclass Model(torch.nn.Module):\n    pass\n", "c.py", p.context,
                         str(tmp_path), backend="cuda")
    assert own.cls is not problems_model and own.cls is p.context["Model"]
    q = load_problem(read_source(problem("matmul")), "matmul.py")
    with pytest.raises(LoadError) as e:
        load_candidate("x = 1\n", "c.py", q.context, str(tmp_path), backend="cuda")
    assert e.value.code == "candidate-incomplete"


def test_syntax_and_runtime_errors_are_load_errors(tmp_path):
    p = load_problem(read_source(problem("matmul")), "matmul.py")
    with pytest.raises(LoadError) as e:
        load_candidate(read_source(candidate("syntax_error")), "s.py", p.context, str(tmp_path))
    assert e.value.code == "candidate-syntax"
    with pytest.raises(LoadError) as e:
        load_candidate("raise ValueError('boom')\n", "r.py", p.context, str(tmp_path))
    assert e.value.code == "candidate-load" and "boom" in str(e.value)


def test_tempfile_path_imports_from_a_file(tmp_path):
    # @triton.jit reads a function's source through its code object's file name.
    src = "import inspect\ndef kernel():\n    pass\nclass ModelNew:\n    pass\nSOURCE = inspect.getsource(kernel)\n"
    c = load_candidate(src, "t.py", {}, str(tmp_path), backend="triton")
    assert c.tempfile is not None and c.tempfile.endswith(".py")
    assert open(c.tempfile).read() == src
    assert c.cls.__module__ == "temp_module"
    assert c.cls.__init__ is object.__init__


def test_backend_detection():
    assert detect_backend(read_source(candidate("relu_triton"))) == "triton"
    assert detect_backend("from triton import language as tl\n") == "triton"
    assert detect_backend(read_source(candidate("matmul_correct"))) == "cuda"
    assert detect_backend("# import triton in a comment\nx = 1\n") == "cuda"


_SIZED = '''
import torch
batch_size = 16
dim = 4
hidden = dim * 2
def helper(x):
    return x
class Model(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.l = torch.nn.Linear(n, hidden)
    def forward(self, x):
        return helper(self.l(x))
def get_inputs():
    return [torch.rand(batch_size, dim)]
def get_init_inputs():
    return [dim]
'''


def test_sizes_reach_models_follows_derived_constants_into_classes_and_functions():
    from kcv.kernelbench import sizes_reach_models

    # batch_size is read only by get_inputs: models at any batch are the same models.
    assert not sizes_reach_models(_SIZED, {"batch_size"})
    assert not sizes_reach_models(_SIZED, set())
    # dim reaches the Linear through hidden, a module-level value computed from it.
    assert sizes_reach_models(_SIZED, {"dim"})
    assert sizes_reach_models(_SIZED, {"batch_size", "dim"})
    # A module-level function that reads a size counts, since a model may call it.
    assert sizes_reach_models(_SIZED.replace("return x\n", "return x.view(batch_size, -1)\n"), {"batch_size"})
    assert sizes_reach_models("def broken(:\n", {"batch_size"})
