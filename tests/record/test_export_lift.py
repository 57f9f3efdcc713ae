"""torchleak's global module hooks lifted out of torch's tables for an export and put
back exactly: the same keys in the same order, the program's own hooks untouched."""

from __future__ import annotations

import torch
from torch.nn.modules import module as nn_module

from torchleak.record.export_lift import ExportLift


def _noop(module: object, args: object) -> None:
    return None


def test_lifted_hooks_come_back_under_their_keys_in_their_order() -> None:
    table = nn_module._global_forward_pre_hooks
    theirs_before = nn_module.register_module_forward_pre_hook(_noop)
    ours = nn_module.register_module_forward_pre_hook(_noop)
    theirs_after = nn_module.register_module_forward_pre_hook(_noop)
    try:
        as_it_was = list(table.items())
        lift = ExportLift(lambda: [ours])
        with lift.lifted():
            assert ours.id not in table
            assert theirs_before.id in table and theirs_after.id in table
        assert list(table.items()) == as_it_was
    finally:
        for handle in (theirs_before, ours, theirs_after):
            handle.remove()


def test_export_is_wrapped_while_installed_and_torchs_own_after() -> None:
    original = torch.export.export
    lift = ExportLift(lambda: [])
    lift.install()
    try:
        assert torch.export.export is not original
        assert torch.export.export.__wrapped__ is original  # type: ignore[attr-defined]
    finally:
        lift.uninstall()
    assert torch.export.export is original
