"""The client a worker measures with: HTTP streaming (``http``) over keep-alive connections
that stamp their reads and parse responses in C (``connection``), pooled
(``connection_pool``), with
request heads built once (``headers``), bursts spread over loop turns (``turns``), the event
loop it runs on (``event_loop``), request bodies (``body``) and the packet-capture process
(``capture_process``)."""
