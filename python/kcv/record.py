"""The verdict record of a Python candidate, as a dict with a few conveniences."""

from __future__ import annotations

from typing import Any


class Record(dict):
    """A kcv record (docs/record.md): a dict, plus ``.gates`` by id and shortcuts."""

    @property
    def gates(self) -> dict[str, dict]:
        """Gate results by id, in GATES.md's order."""
        return {g["id"]: g for g in self.get("gates", [])}

    def verdict(self, gate: str) -> str:
        return self.gates[gate]["verdict"]

    @property
    def verdicts(self) -> dict[str, str]:
        return {gid: g["verdict"] for gid, g in self.gates.items()}

    @property
    def failed(self) -> list[str]:
        return [gid for gid, g in self.gates.items() if g["verdict"] == "fail"]

    @property
    def standard_check(self) -> dict[str, Any] | None:
        return self.get("standard_check")

    @property
    def timing(self) -> dict[str, Any] | None:
        """Seconds per stage: load_s, standard_check_s, reference_s, gates_s by id, total_s."""
        return self.get("timing")

    @property
    def error(self) -> dict | None:
        return self.get("error")

    @property
    def passed(self) -> bool:
        """No gate failed or errored, and the candidate could be judged."""
        return self.error is None and all(g["verdict"] in ("pass", "n/a") for g in self.get("gates", []))

    def signatures(self, gate: str) -> list[str]:
        return list(self.gates[gate].get("signature", []))

    def __repr__(self) -> str:
        return f"Record({self.get('contract', '?')}: {self.verdicts})"
