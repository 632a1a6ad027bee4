"""The hook interface: what watches a run (`Hook`, the records it is told of, `HookList`),
the findings a hook returns, and the `AgentView` it sees of an agent.
"""
