/**
 * The coherence layer: objects in remote memory with a versioned header, read by
 * validated one-sided reads or cached under leases, written under a lock word with
 * double-buffered payloads. See {@code docs/coherence.md}.
 */
package io.membus.coherence;
