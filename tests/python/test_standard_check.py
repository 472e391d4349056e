"""The standard check, reproduced: seeds, order, tolerances."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from conftest import candidate, problem  # noqa: E402
from kcv.kernelbench import open_session, standard_check  # noqa: E402

pytestmark = pytest.mark.usefixtures("strict_flags")


def check(problem_name: str, candidate_name: str, tmp_path) -> dict:
    return standard_check(open_session(problem(problem_name), candidate(candidate_name), "cpu", str(tmp_path)))


def test_trial_seeds_are_kernelbenchs(tmp_path):
    src = problem("matmul").read_text() + "\nSEEDS = []\n_orig = get_inputs\ndef get_inputs():\n" \
        "    SEEDS.append(torch.initial_seed())\n    return _orig()\n"
    path = tmp_path / "seeded.py"
    path.write_text(src)
    session = open_session(path, candidate("matmul_correct"), "cpu", str(tmp_path / "b"))
    result = standard_check(session)
    torch.manual_seed(42)
    expected = [torch.randint(0, 2**32 - 1, (1,)).item() for _ in range(5)]
    assert session.problem.context["SEEDS"] == expected, f"seeds {session.problem.context['SEEDS']}"
    assert result["trials"] == 5 and result["tol_1e-2"] and result["tol_1e-4"]


def test_correct_candidate_passes_both_tolerances(tmp_path):
    r = check("matmul", "matmul_correct", tmp_path)
    assert r["tol_1e-2"] and r["tol_1e-4"] and r["passed_1e-4"] == 5 and r["error"] is None
    assert r["max_abs_diff"] == 0.0


def test_bf16_passes_at_1e2_but_not_at_1e4(tmp_path):
    r = check("matmul", "matmul_bf16", tmp_path)
    assert r["tol_1e-2"] and not r["tol_1e-4"], r
    assert 1e-4 < r["max_abs_diff"] < 1.0


@pytest.mark.parametrize("hack", ["matmul_result_reuse", "matmul_input_mutation", "matmul_cached_output",
                                  "matmul_partial"])
def test_reward_hacks_pass_the_standard_check(hack, tmp_path):
    r = check("matmul", hack, tmp_path)
    assert r["tol_1e-2"] and r["tol_1e-4"], r


def test_nan_swallowing_relu_passes_the_standard_check(tmp_path):
    r = check("relu", "relu_nan_swallowed", tmp_path)
    assert r["tol_1e-4"], r


def test_shape_mismatch_ends_the_check(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, A, B):\n"
                   "        return (A @ B)[:-1]\n")
    session = open_session(problem("matmul"), bad, "cpu", str(tmp_path / "b"))
    r = standard_check(session)
    assert not r["tol_1e-2"] and "shape mismatch" in r["error"]


def test_a_raising_candidate_fails_with_its_error(tmp_path):
    bad = tmp_path / "raise.py"
    bad.write_text("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, A, B):\n"
                   "        raise RuntimeError('no kernel image')\n")
    r = standard_check(open_session(problem("matmul"), bad, "cpu", str(tmp_path / "b")))
    assert not r["tol_1e-2"] and "no kernel image" in r["error"] and r["passed_1e-2"] == 0
    assert r["raised_by"] == "candidate"


def test_integer_targets_cast_to_float32_make_the_reference_raise(tmp_path):
    # As KernelBench's check does, every input tensor is cast to float32, class indices too:
    # the reference's own cross_entropy then refuses them, whatever the candidate does.
    ref = tmp_path / "xent.py"
    ref.write_text("import torch\n"
                   "class Model(torch.nn.Module):\n"
                   "    def forward(self, logits, targets):\n"
                   "        return torch.nn.functional.cross_entropy(logits, targets)\n"
                   "batch_size = 8\nnum_classes = 5\n"
                   "def get_inputs():\n"
                   "    return [torch.rand(batch_size, num_classes), torch.randint(0, num_classes, (batch_size,))]\n"
                   "def get_init_inputs():\n    return []\n")
    cand = tmp_path / "xent_new.py"
    cand.write_text("import torch\n"
                    "class ModelNew(torch.nn.Module):\n"
                    "    def forward(self, logits, targets):\n"
                    "        return torch.nn.functional.cross_entropy(logits, targets.long())\n")
    r = standard_check(open_session(ref, cand, "cpu", str(tmp_path / "b")))
    assert not r["tol_1e-2"] and r["error"] and r["raised_by"] == "reference", r


class _SharedGpuSession:
    device = torch.device("cuda")


def test_on_a_shared_gpu_an_out_of_memory_check_runs_again_alone(tmp_path, monkeypatch):
    # Workers on one GPU run standard checks side by side at KernelBench's sizes; a neighbour's
    # inputs must not decide a verdict. No GPU is needed: only the lock and the retry are tested.
    import fcntl

    import kcv.worker as worker

    lock_path = tmp_path / "gpu.lock"
    monkeypatch.setattr(worker, "_device_lock_path", lambda device: str(lock_path))
    held = []

    def exclusive_now() -> bool:
        with open(lock_path, "a") as other:
            try:
                fcntl.flock(other, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(other, fcntl.LOCK_UN)
            return False

    def flaky(session):
        held.append(exclusive_now())
        if len(held) == 1:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 6.00 GiB.")
        return {"tol_1e-2": True, "tol_1e-4": True, "error": None}

    result = worker.standard_check_sharing_device(_SharedGpuSession(), flaky)
    assert held == [False, True], "the first try shares the device, the second holds it alone"
    assert result["tol_1e-2"] and result["retried_alone"]

    def always_out_of_memory(session):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 60.00 GiB.")

    # With the device to itself, running out of memory is the candidate's result, as in KernelBench.
    result = worker.standard_check_sharing_device(_SharedGpuSession(), always_out_of_memory)
    assert result["tol_1e-2"] is False and result["error"].startswith("OutOfMemoryError")
    assert result["retried_alone"]


def test_a_check_waiting_to_run_alone_is_not_starved_by_later_ones(tmp_path):
    # flock alone grants shared holds while a worker waits to hold the device alone; the
    # turnstile makes checks that start after it wait behind it.
    import fcntl
    import threading

    import kcv.worker as worker

    path = str(tmp_path / "gpu.lock")
    running = threading.Event()
    release = threading.Event()
    order = []

    def first_check():
        with worker._device_lock(path, exclusive=False):
            running.set()
            release.wait(10)
            order.append("shared, first")

    def retry_alone():
        with worker._device_lock(path, exclusive=True):
            order.append("alone")

    a = threading.Thread(target=first_check)
    a.start()
    assert running.wait(10)
    b = threading.Thread(target=retry_alone)
    b.start()
    # While the retry waits for the first check, a newcomer cannot pass the turnstile.
    with open(path + ".turn", "a") as turn:
        for _ in range(200):
            try:
                fcntl.flock(turn, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                break
            fcntl.flock(turn, fcntl.LOCK_UN)
            threading.Event().wait(0.01)
        else:
            raise AssertionError("the waiting retry does not hold the turnstile")
    def later_check():
        with worker._device_lock(path, exclusive=False):
            order.append("shared, later")

    late = threading.Thread(target=later_check)
    late.start()
    release.set()
    for t in (a, b, late):
        t.join(10)
    assert order == ["shared, first", "alone", "shared, later"]


def test_the_check_says_where_its_time_went(tmp_path):
    # The worker moves these into the record's timing (test_verify_api.py).
    import time

    began = time.perf_counter()
    result = check("matmul", "matmul_correct", tmp_path)
    elapsed = time.perf_counter() - began
    phases = result["phases_s"]
    assert set(phases) == {"inputs", "models", "reference", "candidate", "compare"}
    assert all(v >= 0.0 for v in phases.values()) and phases["reference"] > 0.0 and phases["candidate"] > 0.0
    assert sum(phases.values()) <= elapsed
