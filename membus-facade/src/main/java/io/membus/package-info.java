/**
 * The facade: one artifact that assembles a node from one config (transport by
 * {@code ServiceLoader}, membership, allocator, coherent heap, collections by name).
 */
package io.membus;
