"""Talking to servers outside eaglebug over the network: a launched SGLang, a Prometheus."""
