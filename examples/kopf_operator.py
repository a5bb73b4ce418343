r"""A kopf operator whose Kubernetes events go through kubevents: client-go's aggregation and spam filter.

Run it against your cluster (``pip install 'kubevents[kopf]'``; the credentials are kopf's usual ones, e.g.
your kubeconfig)::

    kopf run --standalone --namespace default examples/kopf_operator.py

and in another terminal make the ConfigMap it watches for::

    kubectl create configmap kubevents-demo --namespace default
    kubectl get events --namespace default --field-selector involvedObject.name=kubevents-demo \
        -o custom-columns=COUNT:.count,TYPE:.type,REASON:.reason,MESSAGE:.message

Its handler warns 500 times about the ConfigMap, as an operator does about a dependency that keeps failing.
kopf alone posts 500 events. With the one line in ``startup``, the cluster gets 10: the first 9 messages once
each, then one "(combined from similar events)" event with count 16, as client-go's spam filter lets 25 of
the 500 through (a burst of 25 per object, then one every 5 minutes). Stop the operator with Ctrl-C: what is
still queued is written first.
"""

import kopf

import kubevents.kopf


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, **_: object) -> None:
    kubevents.kopf.install(settings)


@kopf.on.create("configmaps", when=lambda name, **_: name == "kubevents-demo")
async def probe(body: kopf.Body, **_: object) -> None:
    for attempt in range(1, 501):
        kopf.warn(body, reason="ProbeFailed", message=f"probe {attempt} of 500 failed")
