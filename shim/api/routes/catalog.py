"""``/recipes`` (any caller), ``/policies`` and ``/policies/{policy_id}`` (operators)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from contracts import Role
from shim.api.deps import require
from shim.api.http import Answer
from shim.api.openapi import OBJECT, Listing, Op, documented
from shim.api.params import PolicyId
from shim.api.services import catalog
from shim.tokens import Identity

router = APIRouter()


@router.get("/recipes", openapi_extra=documented(Op(answer=Listing("recipes"))))
def get_recipes(caller: Annotated[Identity, Depends(require())]) -> Answer:
    return Answer(catalog.recipes())


@router.get("/policies", openapi_extra=documented(Op(answer=OBJECT)))
def get_policies(caller: Annotated[Identity, Depends(require(Role.OPERATOR))]) -> Answer:
    return Answer(catalog.policies())


@router.get("/policies/{policy_id}", openapi_extra=documented(Op(answer=OBJECT, errors=(404, 422))))
def get_policy(
    caller: Annotated[Identity, Depends(require(Role.OPERATOR))], policy_id: PolicyId
) -> Answer:
    return Answer(catalog.policy(policy_id))
