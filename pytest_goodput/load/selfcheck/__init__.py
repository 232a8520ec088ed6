"""The client's check on itself: stalls, departures from the capture, did it set the pace."""
