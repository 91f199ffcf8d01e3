"""Background users (issue 41): devices ue2 ... ueN replay page loads at the HTTP level
while ue1 runs the measured workload. deps: a page's requests in dependency order;
think: think times between pages; replay: the asyncio HTTP/2 replayer that runs on a
device (clients: it or the Rust `bguser`); background: starting, stopping and reading them in a testbed; validate: their
per-channel bytes and packet sizes against Chromium's."""
