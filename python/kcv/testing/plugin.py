"""The kcv pytest plugin: a ``kcv_verify`` fixture, command-line defaults, an optional journal of
every record a test session made (``kcv report`` reads it), and a summary line.

Registered as a ``pytest11`` entry point, so installing kcv enables it; ``-p no:kcv`` disables
it. A test asserts a kernel in one line::

    def test_my_softmax(kcv_verify):
        kcv_verify("build/libmysoftmax.so", contract="softmax-f32")

    def test_my_model(kcv_verify):
        kcv_verify("candidate.py", reference="problems/19_ReLU.py", gates=["ORD-01", "EXC-01"])
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from . import assert_kernel


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kcv", "kernel verification (kcv)")
    group.addoption("--kcv-seed", type=int, default=0, help="master seed of every kcv probe (default 0)")
    group.addoption("--kcv-quick", action="store_true", default=False,
                    help="smaller kcv sweeps (recorded in each record)")
    group.addoption("--kcv-device", default="cpu", help="device for KernelBench-style candidates (cpu, cuda)")
    group.addoption("--kcv-profile", default="strict", choices=["strict", "ftz", "fast-math", "relaxed"],
                    help="profile whose accepted signature classes do not fail a test")
    group.addoption("--kcv-journal", default=None, metavar="PATH",
                    help="append every kcv record of the session to this journal (for `kcv report`)")


class _Session:
    """Records made in this session, and the journal they are appended to."""

    def __init__(self, journal: str | None):
        self.journal = Path(journal) if journal else None
        self.passed = 0
        self.failed = 0
        self._lock = threading.Lock()

    def add(self, record: dict, test_id: str, ok: bool) -> None:
        with self._lock:
            if ok:
                self.passed += 1
            else:
                self.failed += 1
            if self.journal is None:
                return
            self.journal.parent.mkdir(parents=True, exist_ok=True)
            with open(self.journal, "a", encoding="utf-8") as f:
                f.write(json.dumps({**record, "corpus_id": test_id}) + "\n")


_SESSION_KEY = pytest.StashKey[_Session]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_SESSION_KEY] = _Session(config.getoption("kcv_journal"))


class KernelVerifier:
    """The ``kcv_verify`` fixture: call it like :func:`kcv.testing.assert_kernel`; the session's
    command-line options give the defaults of seed, quick, device and profile."""

    def __init__(self, config: pytest.Config, test_id: str):
        self._config = config
        self._test_id = test_id
        self._calls = 0
        self.records: list[dict] = []

    def __call__(self, candidate: str | os.PathLike, contract: str | None = None, **kwargs) -> dict:
        from . import KernelVerificationError, verify_candidate

        opt = self._config.getoption
        kwargs.setdefault("seed", opt("kcv_seed"))
        kwargs.setdefault("quick", opt("kcv_quick"))
        kwargs.setdefault("device", opt("kcv_device"))
        kwargs.setdefault("profile", opt("kcv_profile"))
        profile = kwargs.pop("profile")
        gates = kwargs.get("gates")
        record = verify_candidate(candidate, contract, **kwargs)
        self.records.append(record)
        self._calls += 1
        test_id = self._test_id if self._calls == 1 else f"{self._test_id}#{self._calls}"
        session = self._config.stash[_SESSION_KEY]
        try:
            assert_kernel(candidate, contract, record=record, gates=gates, profile=profile)
        except KernelVerificationError:
            session.add(record, test_id, ok=False)
            raise
        session.add(record, test_id, ok=True)
        return record


@pytest.fixture
def kcv_verify(request: pytest.FixtureRequest) -> KernelVerifier:
    """Verifies a kernel with kcv and fails the test with the gates' evidence if it is wrong."""
    return KernelVerifier(request.config, request.node.nodeid)


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    session = config.stash.get(_SESSION_KEY, None)
    if session is None or session.passed + session.failed == 0:
        return
    terminalreporter.write_sep("-", "kcv")
    terminalreporter.write_line(f"{session.passed} passed, {session.failed} failed")
    if session.journal is not None:
        terminalreporter.write_line(f"records appended to {session.journal} (kcv report {session.journal})")
