from __future__ import annotations

import pytest

from tests.security.opa._build import Pki, make_pki


@pytest.fixture(scope="session")
def pki() -> Pki:
    return make_pki()
