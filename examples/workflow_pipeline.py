"""A documentation build pipeline as a workflow, the way a docs platform would run one: fetch the
sources, render every page in parallel, build the search index once all pages are rendered, then
package two formats side by side and publish when both are done. One page fails to render on its
first try: it is retried, and the steps after it simply wait. A batch of thumbnails reports once
when all are done."""

from __future__ import annotations

import asyncio

from _support import DATABASE_URL, PREFIX

from conveyor import Batch, Conveyor, Record, Workflow, current_job, job

PAGES = ["intro", "install", "guide", "api"]
app = Conveyor(DATABASE_URL, prefix=PREFIX, queues={"docs": 5})


@job(queue="docs")
async def fetch_sources(repo: str) -> Record:
    return Record({"repo": repo, "pages": PAGES})


@job(queue="docs", backoff=lambda job: 0.5)  # a failed render is retried half a second later
async def render_page(page: str) -> Record:
    if page == "guide" and current_job().attempt == 1:
        raise RuntimeError("the renderer timed out")  # retried: the steps after it wait
    return Record(f"<h1>{page}</h1>")


@job(queue="docs")
async def build_index() -> Record:
    rendered = await app.dependency_results()  # what each render_page recorded, by step name
    return Record(sorted(name.removeprefix("render-") for name in rendered))


@job(queue="docs")
async def package(fmt: str) -> Record:
    return Record(f"docs.{fmt}")


@job(queue="docs")
async def publish() -> Record:
    artifacts = await app.dependency_results()
    return Record(sorted(artifacts.values()))


@job(queue="docs")
async def thumbnail(page: str) -> None:
    await asyncio.sleep(0.01)


@job(queue="docs")
async def thumbnails_done() -> None:
    counts = current_job().meta["deps_ended"]
    print(f"thumbnails: {counts['completed']} completed")  # type: ignore[index]


def pipeline() -> Workflow:
    workflow = Workflow(name="docs-build").add("fetch", fetch_sources.new(repo="org/docs"))
    for page in PAGES:
        request = render_page.new(page=page).with_options(max_attempts=3)
        workflow.add(f"render-{page}", request, deps=["fetch"])
    workflow.add("index", build_index.new(), deps=[f"render-{page}" for page in PAGES])
    workflow.add("pdf", package.new(fmt="pdf"), deps=["index"])
    workflow.add("html", package.new(fmt="html"), deps=["index"])
    return workflow.add("publish", publish.new(), deps=["pdf", "html"])


async def main() -> None:
    await app.install()
    await app.delete_jobs()
    async with app:
        workflow = pipeline()
        await app.enqueue_many(workflow)
        batch = Batch(on_completed=thumbnails_done.new()).add_many(thumbnail.new(page=p) for p in PAGES)
        await app.enqueue_many(batch)
        for _ in range(600):
            status = await app.workflow_status(workflow.id)
            if status.finished and (await app.workflow_status(batch.id)).finished:
                break
            await asyncio.sleep(0.1)
        print("workflow: " + ", ".join(f"{n} {state.value}" for state, n in status.counts.items()))
        ends = {name: job.completed_at for name, job in status.steps.items()}
        first_render = min(ends[f"render-{page}"] for page in PAGES)  # type: ignore[type-var]
        last_render = max(ends[f"render-{page}"] for page in PAGES)  # type: ignore[type-var]
        print(f"fetch before renders: {ends['fetch'] <= first_render}")  # type: ignore[operator]
        print(f"index after every render: {ends['index'] >= last_render}")  # type: ignore[operator]
        print(f"index: {status.results['index']}")
        print(f"published: {status.results['publish']}")
        print(f"render-guide attempts: {status.steps['render-guide'].attempt}")


if __name__ == "__main__":
    asyncio.run(main())
