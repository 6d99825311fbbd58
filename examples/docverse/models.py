"""The service's tables: builds (one per upload) and editions (a stable URL, such as a branch's,
served by the latest build published for it).

Their names start with ``docverse_``: they share the database (and, on PostgreSQL, the schema)
with Conveyor's ``oban_*`` tables. Times are naive UTC on both engines, as Conveyor stores them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum

from sqlalchemy import JSON, BigInteger, Enum, ForeignKey, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


def utcnow() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


class BuildStatus(StrEnum):
    """Where a build is; the job moves it along, ``GET /builds/{id}`` reports it."""

    UPLOADED = "uploaded"
    INGESTING = "ingesting"
    RENDERING = "rendering"
    PUBLISHING = "publishing"
    PUBLISHED = "published"
    FAILED = "failed"

    @property
    def is_final(self) -> bool:
        return self in (BuildStatus.PUBLISHED, BuildStatus.FAILED)


class Base(DeclarativeBase):
    pass


class Build(Base):
    __tablename__ = "docverse_builds"

    id: Mapped[int] = mapped_column(primary_key=True)
    project: Mapped[str] = mapped_column(String(64), index=True)
    git_ref: Mapped[str] = mapped_column(String(100))
    # Stored as its value in a plain string column (no PostgreSQL enum type to migrate).
    status: Mapped[BuildStatus] = mapped_column(
        Enum(BuildStatus, native_enum=False, length=16, values_callable=lambda e: [s.value for s in e])
    )
    #: The uploaded files by path; the render phase writes ``rendered`` next to them.
    files: Mapped[dict[str, str]] = mapped_column(JSON)
    rendered: Mapped[dict[str, str] | None] = mapped_column(JSON)
    #: The processing job (Conveyor's id), written in the upload's transaction.
    job_id: Mapped[int | None] = mapped_column(BigInteger)
    error: Mapped[str | None] = mapped_column(Text)
    published_url: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(default=utcnow, index=True)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)


class Edition(Base):
    __tablename__ = "docverse_editions"

    project: Mapped[str] = mapped_column(String(64), primary_key=True)
    slug: Mapped[str] = mapped_column(String(100), primary_key=True)
    build_id: Mapped[int] = mapped_column(ForeignKey(Build.id))
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)


def edition_slug(git_ref: str) -> str:
    """The edition a git ref publishes to: ``tickets/DM-1`` is served as ``tickets-DM-1``."""
    return git_ref.replace("/", "-")


def edition_url(project: str, slug: str) -> str:
    return f"/{project}/v/{slug}/"
