/**
 * Remote off-heap collections reached by name from every node: {@code DsmMap},
 * {@code DsmAtomicLong}, {@code DsmLongArray}/{@code DsmDoubleArray},
 * {@code DsmQueue} and {@code DsmLock}. See {@code docs/collections.md}.
 */
package io.membus.collections;
