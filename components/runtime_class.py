"""The `nvidia` RuntimeClass of the device-plugin path.

The class name alone does not configure the containerd handler. The class is created only when the
stack declares that the hosts' containerd has an `nvidia` handler; otherwise it must already exist, and a
read of it fails the update with a message saying so.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s


class NvidiaRuntimeClass(pulumi.ComponentResource):
    """Create or require the RuntimeClass."""

    class_name: pulumi.Output[str]
    """metadata.name of the RuntimeClass."""
    created: pulumi.Output[bool]
    """Whether this stack owns the class."""

    def __init__(
        self,
        name: str,
        *,
        class_name: str,
        hosts_have_handler: bool,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("eks-hybrid-gpu:cluster:NvidiaRuntimeClass", name, None, opts)
        if hosts_have_handler:
            k8s.node.v1.RuntimeClass(
                f"{name}-class",
                metadata={"name": class_name},
                handler="nvidia",
                opts=pulumi.ResourceOptions(parent=self),
            )
        else:
            k8s.node.v1.RuntimeClass.get(f"{name}-existing", class_name, opts=pulumi.ResourceOptions(parent=self))
        self.class_name = pulumi.Output.from_input(class_name)
        self.created = pulumi.Output.from_input(hosts_have_handler)
        self.register_outputs({"class_name": self.class_name, "created": self.created})
