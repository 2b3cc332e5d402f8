"""The admin API's hash bank routes: an account's PDQ hashes of rejected images, their removal, import and export.

On the admin listener only, behind the admin token. The CSV is HMA's (store/hash_bank/csv_format.py); docs/hash-bank.md
describes the matching. An import that would take the bank past its cap (MODERATION_HASH_BANK_MAX_PER_ACCOUNT) is
409 `hash_bank_full` and adds nothing.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from pydantic import BaseModel

from store.hash_bank.bank import BankEntry, BankFull
from store.hash_bank.csv_format import hashes_of_csv, to_csv
from admin.guard import require_admin
from serve_app.auth import services
from serve_app.errors import ErrorKind, InvalidRequest, NotFound

router = APIRouter(prefix="/admin/v1", dependencies=[Depends(require_admin)])

PDQ_PATTERN = r"^[0-9a-f]{64}$"
# One import request: 100,000 lines of about 110 bytes; a larger bank is imported in several requests.
MAX_IMPORT_BYTES = 16 * 1024 * 1024
MAX_IMPORT_HASHES = 100_000
ImportTooLarge = ErrorKind(413, "import_too_large", "An import is at most 16 MiB and 100,000 hashes.")
HashBankFull = ErrorKind(409, "hash_bank_full", "The account's hash bank is full.")


class BankEntryView(BaseModel):
    hash: str
    review_id: int | None
    added_at: float


class BankPage(BaseModel):
    account: str
    count: int
    max_entries: int  # the bank's cap
    rejections_not_banked: int  # rejected images not banked because the bank was full
    entries: list[BankEntryView]  # oldest first, at most `limit`


class Imported(BaseModel):
    account: str
    added: int  # new hashes (one already banked is kept as it was)
    skipped: int  # lines that were not a hash
    count: int  # the bank's size now


def _view(entry: BankEntry) -> BankEntryView:
    return BankEntryView(hash=entry.hash, review_id=entry.review_id, added_at=entry.added_at)


@router.get("/accounts/{account}/hash-bank", response_model=BankPage)
async def list_bank(
    account: str, request: Request, limit: Annotated[int, Query(ge=1, le=10_000)] = 100
) -> BankPage:
    bank = services(request).hash_bank
    entries = await bank.entries(account)
    return BankPage(account=account, count=len(entries), max_entries=bank.max_entries,
                    rejections_not_banked=await bank.skipped(account), entries=[_view(e) for e in entries[:limit]])


@router.delete("/accounts/{account}/hash-bank/{pdq}", status_code=204)
async def remove_hash(account: str, pdq: Annotated[str, Path(pattern=PDQ_PATTERN)], request: Request) -> Response:
    """A moderator takes a hash out: the image it came from is judged by the models again."""
    if not await services(request).hash_bank.remove(account, pdq):
        raise NotFound(f"The account's bank holds no hash {pdq}.")
    return Response(status_code=204)


@router.get("/accounts/{account}/hash-bank/export")
async def export_bank(account: str, request: Request) -> Response:
    entries = await services(request).hash_bank.entries(account)
    disposition = f'attachment; filename="hash-bank-{len(entries)}.csv"'
    return Response(to_csv(entries), media_type="text/csv; charset=utf-8", headers={"Content-Disposition": disposition})


@router.post("/accounts/{account}/hash-bank/import", response_model=Imported)
async def import_bank(account: str, request: Request) -> Imported:
    """The body is the CSV itself (text/csv)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_IMPORT_BYTES:
        raise ImportTooLarge()
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_IMPORT_BYTES:
            raise ImportTooLarge()
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidRequest("The import must be UTF-8 text.") from None
    hashes, skipped = hashes_of_csv(text)
    if len(hashes) > MAX_IMPORT_HASHES:
        raise ImportTooLarge()
    bank = services(request).hash_bank
    try:
        added = await bank.add_many(account, [(pdq, None) for pdq in hashes], keep_existing=True)
    except BankFull as full:
        raise HashBankFull(str(full)) from None
    return Imported(account=account, added=added, skipped=skipped, count=await bank.count(account))
