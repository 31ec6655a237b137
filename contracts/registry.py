"""Contracts by tool name, loaded from modules or .py files. Duplicate names are an error."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import ModuleType

from contracts.contract import Contract, ContractError, contract_of


class ContractRegistry:
    def __init__(self, contracts: Iterable[Contract] = ()) -> None:
        self._by_name: dict[str, Contract] = {}
        self._origin: dict[str, str] = {}
        for contract in contracts:
            self.add(contract, origin="<given>")

    def add(self, contract: Contract, *, origin: str) -> None:
        if contract.name in self._by_name:
            if self._by_name[contract.name] is contract:
                return  # the same class reached twice (re-exported): not a duplicate
            raise ContractError(f"duplicate contract name {contract.name!r}: defined in "
                                f"{self._origin[contract.name]} and in {origin}")
        self._by_name[contract.name] = contract
        self._origin[contract.name] = origin

    def load(self, target: str) -> list[Contract]:
        """Import a module (`pkg.mod`) or a file (`path/to/contracts.py`) and add its
        contracts. Returns what it added."""
        module = _import(target)
        found = [c for c in (contract_of(v) for v in vars(module).values()) if c is not None]
        if not found:
            raise ContractError(f"{target!r} defines no @tool contracts")
        for contract in found:
            self.add(contract, origin=target)
        return found

    def get(self, name: str) -> Contract | None:
        return self._by_name.get(name)

    def __iter__(self) -> Iterator[Contract]:
        return iter(self._by_name.values())

    def __len__(self) -> int:
        return len(self._by_name)

    def names(self) -> list[str]:
        return sorted(self._by_name)


def _import(target: str) -> ModuleType:
    path = Path(target)
    try:
        if target.endswith(".py") or path.exists():
            if not path.is_file():
                raise ContractError(f"contracts file {target!r} does not exist")
            name = f"strictcall_contracts_{abs(hash(path.resolve()))}"
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is None or spec.loader is None:
                raise ContractError(f"cannot load {target!r} as a Python file")
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
            return module
        return importlib.import_module(target)
    except ContractError:
        raise
    except ImportError as exc:
        raise ContractError(f"cannot import contracts {target!r}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - a user's module failed while loading
        raise ContractError(f"loading contracts {target!r} failed: "
                            f"{type(exc).__name__}: {exc}") from None
