"""The application layer: composes connectors and operators into commands.

Core operators (``streams.fragmentation``, ``streams.placement``, ``streams.profiles``) never
import ``connectors``; only this package wires the two together.
"""
