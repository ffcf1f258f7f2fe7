"""``/recipes`` (any caller), ``/policies`` and ``/policies/{policy_id}`` (operators)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse

from contracts import Role
from shim.api.deps import require
from shim.api.params import PolicyId
from shim.api.services import catalog
from shim.tokens import Identity

router = APIRouter()


@router.get("/recipes")
def get_recipes(caller: Annotated[Identity, Depends(require())]) -> JSONResponse:
    return JSONResponse(catalog.recipes())


@router.get("/policies")
def get_policies(caller: Annotated[Identity, Depends(require(Role.OPERATOR))]) -> JSONResponse:
    return JSONResponse(catalog.policies())


@router.get("/policies/{policy_id}")
def get_policy(
    caller: Annotated[Identity, Depends(require(Role.OPERATOR))], policy_id: PolicyId
) -> JSONResponse:
    return JSONResponse(catalog.policy(policy_id))
