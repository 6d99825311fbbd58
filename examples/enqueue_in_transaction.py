"""Enqueueing inside your own transaction: psycopg and SQLAlchemy, blocking and async.

The job is written with the application's own rows: it exists (and its queue is notified) only if
the transaction commits. A rollback leaves neither the rows nor the job.
"""

from __future__ import annotations

import asyncio

import psycopg
from _support import DATABASE_URL, PREFIX
from psycopg import sql
from sqlalchemy import create_engine, text
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from sqlalchemy.orm import Session

from conveyor import Conveyor, job

# SQLAlchemy must use the psycopg (3) driver; Conveyor accepts the same URL.
ALCHEMY_URL = DATABASE_URL.replace("postgresql://", "postgresql+psycopg://", 1)
SIGNUPS = sql.SQL("{}.signups").format(sql.Identifier(PREFIX))
INSERT_SIGNUP = f'INSERT INTO "{PREFIX}".signups (email) VALUES (:email)'


@job(queue="mail")
async def send_welcome(to: str) -> None:
    print(f"welcome {to}")


def committed(email: str) -> str:
    """What another connection sees: is the signup there, and is its welcome job?"""
    with psycopg.connect(DATABASE_URL, autocommit=True) as conn:
        users = conn.execute(sql.SQL("SELECT count(*) FROM {} WHERE email = %s").format(SIGNUPS), (email,))
        jobs = conn.execute(
            sql.SQL("SELECT count(*) FROM {} WHERE args->>'to' = %s").format(
                sql.Identifier(PREFIX, "oban_jobs")
            ),
            (email,),
        )
        return f"signup rows={_count(users)}, jobs={_count(jobs)}"


def _count(cur: psycopg.Cursor[tuple[int]]) -> int:
    row = cur.fetchone()
    return row[0] if row else 0


def blocking_examples(app: Conveyor) -> None:
    # psycopg, blocking: the job joins the connection's open transaction.
    with (
        psycopg.connect(DATABASE_URL, autocommit=True) as listener,
        psycopg.connect(DATABASE_URL) as conn,
    ):
        listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(f"{PREFIX}.oban_insert")))
        conn.execute(sql.SQL("INSERT INTO {} (email) VALUES (%s)").format(SIGNUPS), ("ada@example.com",))
        app.enqueue_sync(send_welcome.new(to="ada@example.com"), conn=conn)
        print(f"psycopg before commit: {committed('ada@example.com')}")
        heard = [n.payload for n in listener.notifies(timeout=0.3)]
        print(f"psycopg notifications before commit: {heard}")
        conn.commit()
        print(f"psycopg after commit: {committed('ada@example.com')}")
        heard = [n.payload for n in listener.notifies(timeout=2, stop_after=1)]
        print(f"psycopg notifications after commit: {heard}")

    with psycopg.connect(DATABASE_URL) as conn:
        conn.execute(sql.SQL("INSERT INTO {} (email) VALUES (%s)").format(SIGNUPS), ("bob@example.com",))
        app.enqueue_sync(send_welcome.new(to="bob@example.com"), conn=conn)
        conn.rollback()
    print(f"psycopg after rollback: {committed('bob@example.com')}")

    # SQLAlchemy, blocking: pass the Session (or a Connection).
    engine = create_engine(ALCHEMY_URL)
    with Session(engine) as session, session.begin():
        session.execute(text(INSERT_SIGNUP), {"email": "cy@example.com"})
        app.enqueue_sync(send_welcome.new(to="cy@example.com"), conn=session)
    print(f"SQLAlchemy Session after commit: {committed('cy@example.com')}")

    try:
        with Session(engine) as session, session.begin():
            session.execute(text(INSERT_SIGNUP), {"email": "dan@example.com"})
            app.enqueue_sync(send_welcome.new(to="dan@example.com"), conn=session)
            raise RuntimeError("payment declined")  # the block ends in an exception: rollback
    except RuntimeError:
        pass
    print(f"SQLAlchemy Session after an exception: {committed('dan@example.com')}")
    engine.dispose()


async def async_examples(app: Conveyor) -> None:
    # psycopg, async.
    async with await psycopg.AsyncConnection.connect(DATABASE_URL) as conn:
        async with conn.transaction():
            await conn.execute(
                sql.SQL("INSERT INTO {} (email) VALUES (%s)").format(SIGNUPS), ("eve@example.com",)
            )
            await app.enqueue(send_welcome.new(to="eve@example.com"), conn=conn)
        print(f"psycopg async after commit: {committed('eve@example.com')}")

    # SQLAlchemy, async: pass the AsyncSession (or an AsyncConnection).
    engine = create_async_engine(ALCHEMY_URL)
    async with AsyncSession(engine) as session:
        async with session.begin():
            await session.execute(text(INSERT_SIGNUP), {"email": "fay@example.com"})
            await app.enqueue_many(
                [send_welcome.new(to="fay@example.com"), send_welcome.new(to="fay@example.com")],
                conn=session,
            )
        print(f"SQLAlchemy AsyncSession after commit: {committed('fay@example.com')}")

        await session.execute(text(INSERT_SIGNUP), {"email": "gus@example.com"})
        await app.enqueue(send_welcome.new(to="gus@example.com"), conn=session)
        await session.rollback()
        print(f"SQLAlchemy AsyncSession after rollback: {committed('gus@example.com')}")
    await engine.dispose()
    await app.close()


def main() -> None:
    app = Conveyor(DATABASE_URL, prefix=PREFIX)
    app.install_sync()
    app.delete_jobs_sync()
    with psycopg.connect(DATABASE_URL, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(SIGNUPS))
        conn.execute(sql.SQL("CREATE TABLE {} (email text NOT NULL)").format(SIGNUPS))
    blocking_examples(app)
    app.close_sync()
    asyncio.run(async_examples(app))


if __name__ == "__main__":
    main()
