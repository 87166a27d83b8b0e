/**
 * The cluster test kit users depend on in test scope: a history recorder, a
 * linearizability checker and a nemesis. See {@code docs/testing.md}.
 */
package io.membus.test;
