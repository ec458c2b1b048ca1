"""Judgments of the live cluster: what it holds, who publishes and who holds each GPU, and what a stack would break."""
