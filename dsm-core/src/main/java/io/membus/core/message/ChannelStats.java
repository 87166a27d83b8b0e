package io.membus.core.message;

/**
 * Counters of one channel on one node since the node started: messages (and
 * payload bytes) received and handled, sent, and failures (a handler that threw,
 * an unknown channel, an oversized message, a sent message that failed).
 *
 * <p><b>Note:</b> an immutable snapshot; the counters are read one by one, so a
 * snapshot taken while messages flow may be off by the messages of that instant.
 *
 * @param channel     the channel id
 * @param name        the registered name, or {@code channel-<id>} when this node sends on it without a handler
 * @param messagesIn  messages received on this node
 * @param bytesIn     payload bytes received
 * @param messagesOut messages this node sent (handed to its transport)
 * @param bytesOut    payload bytes sent
 * @param errors      failures on this node's side: received messages answered with an error, and sent ones that failed
 */
public record ChannelStats(int channel, String name, long messagesIn, long bytesIn, long messagesOut, long bytesOut,
                           long errors) {
}
