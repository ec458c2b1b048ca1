"""Stamp ownership labels on every object an owner's chart renders.

Policies see the rendered objects, not the component's inputs, so the cohort, owner and selector travel
on the objects themselves. Labels are scheduling inputs and audit data, not a security boundary.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

import pulumi

from policy.gpu_allocation.vocab.labels import (
    CHART_ANNOTATION,
    COHORT_LABEL,
    CONFIG_PATH_ANNOTATION,
    OWNER_LABEL,
    SELECTOR_ANNOTATION,
    SHARING_ANNOTATION,
)


@dataclass(frozen=True)
class Ownership:
    """Who owns an object and why: the stamp's content."""

    owner: str
    cohort: str
    selector: Mapping[str, str]
    sharing: str
    config_path: str
    chart: str | None = None
    """`<chart reference>@<version>` for objects a chart renders."""

    @property
    def labels(self) -> dict[str, str]:
        """Labels every owned object carries."""
        return {OWNER_LABEL: self.owner, COHORT_LABEL: self.cohort}

    @property
    def annotations(self) -> dict[str, str]:
        """Annotations every owned object carries."""
        annotations = {
            SELECTOR_ANNOTATION: json.dumps(dict(self.selector), sort_keys=True, separators=(",", ":")),
            SHARING_ANNOTATION: self.sharing,
            CONFIG_PATH_ANNOTATION: self.config_path,
        }
        if self.chart is not None:
            annotations[CHART_ANNOTATION] = self.chart
        return annotations


def stamp(ownership: Ownership) -> pulumi.ResourceTransform:
    """A transform that merges the ownership labels and annotations into each rendered Kubernetes object."""

    def transform(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
        if not args.custom or not args.type_.startswith("kubernetes:"):
            return None
        metadata = args.props.get("metadata")
        if not isinstance(metadata, dict):
            return None
        labels = {**(metadata.get("labels") or {}), **ownership.labels}
        annotations = {**(metadata.get("annotations") or {}), **ownership.annotations}
        props = {**args.props, "metadata": {**metadata, "labels": labels, "annotations": annotations}}
        return pulumi.ResourceTransformResult(props=props, opts=args.opts)

    return transform
