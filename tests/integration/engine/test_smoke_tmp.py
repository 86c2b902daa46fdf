from tests.integration.engine.harness import Harness

LINEAR = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: linear}
spec:
  params: {type: object, properties: {greeting: {type: string, default: hello}}}
  steps:
    a: {block: core.echo, config: {value: "${params.greeting}"}}
    b: {block: core.echo, dependsOn: [a], config: {value: "${steps.a.output.value} world"}}
    c: {block: core.noop, dependsOn: [b]}
"""


async def test_linear(h: Harness) -> None:
    await h.apply(LINEAR)
    run = await h.run("linear")
    async with h.workers(1):
        status = await h.until_settled(run.run_id)
    assert status == "succeeded", await h.logs(run.run_id)
    b = await h.attempts(run.run_id, "b")
    assert b[0]["output"] == {"value": "hello world"}
