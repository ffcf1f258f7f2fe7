"""OpenCode as Gatehouse's executor engine: supervisor, client, turns, the child-session ban."""
