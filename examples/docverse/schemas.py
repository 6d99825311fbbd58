"""What the API accepts and answers. Every limit is checked here, so a bad upload gets a 422 that
names the field and never reaches the database or the queue."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, model_validator

from docverse.models import BuildStatus

#: A project's slug: lowercase letters, digits and inner dashes.
SLUG_PATTERN = r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$"
MAX_FILES = 500
MAX_UPLOAD_BYTES = 1_000_000


def _storable(text: str) -> str:
    # PostgreSQL text holds no NUL, and a lone surrogate has no UTF-8 form: refuse both here.
    if "\x00" in text:
        raise ValueError("contains a NUL character")
    try:
        text.encode()
    except UnicodeEncodeError:
        raise ValueError("is not valid Unicode text") from None
    return text


def _relative(name: str) -> str:
    if any(part in (".", "..") for part in name.split("/")):
        raise ValueError("must be a relative path without '.' or '..' parts")
    return name


GitRef = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,99}$")]
FileName = Annotated[
    str, StringConstraints(max_length=200, pattern=r"^[\w.-]+(?:/[\w.-]+)*$"), AfterValidator(_relative)
]
FileText = Annotated[str, AfterValidator(_storable)]


class BuildUpload(BaseModel):
    """``POST /projects/{slug}/builds``: the files of one documentation build of ``git_ref``."""

    model_config = ConfigDict(extra="forbid")

    git_ref: GitRef
    files: dict[FileName, FileText] = Field(min_length=1, max_length=MAX_FILES)

    @model_validator(mode="after")
    def _not_too_large(self) -> BuildUpload:
        size = sum(len(text.encode()) for text in self.files.values())
        if size > MAX_UPLOAD_BYTES:
            raise ValueError(f"the files hold {size} bytes; at most {MAX_UPLOAD_BYTES} are accepted")
        return self


class BuildAccepted(BaseModel):
    id: int
    status: BuildStatus
    status_url: str
    job_url: str


class JobView(BaseModel):
    id: int
    state: str
    attempt: int
    progress: dict[str, Any]


class BuildView(BaseModel):
    id: int
    project: str
    git_ref: str
    status: BuildStatus
    error: str | None
    published_url: str | None
    created_at: datetime
    #: The processing job as Conveyor has it (None once it was pruned).
    job: JobView | None


class EditionView(BaseModel):
    project: str
    slug: str
    build_id: int
    url: str
