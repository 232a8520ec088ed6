"""The client a worker measures with: HTTP streaming (``http``), its send and receive stamps
(``connection``), the event loop it runs on (``event_loop``) and the packet-capture process
(``capture_process``)."""
