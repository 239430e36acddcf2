"""Controller logic as pure state machines: the batcher and the plan executor."""
