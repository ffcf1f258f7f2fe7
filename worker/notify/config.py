"""The notifications file named by ``GATEHOUSE_NOTIFICATIONS`` (YAML or JSON)."""

from __future__ import annotations

from pathlib import Path

from contracts import NotifyConfig, load_settings_file

__all__ = ["load_config"]


def load_config(path: Path) -> NotifyConfig:
    """The file's settings, or CONFIG_INVALID naming what is wrong with it."""
    return load_settings_file(path, NotifyConfig, "the notifications file")
