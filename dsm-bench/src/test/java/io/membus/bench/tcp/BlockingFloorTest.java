package io.membus.bench.tcp;

import org.junit.jupiter.api.Test;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.ServerSocket;
import java.net.Socket;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Both modes of {@link BlockingFloor} answer every ping with a pong of the size asked. */
class BlockingFloorTest {
    @Test
    void bothModesAnswerEveryPing() throws IOException {
        for (BlockingFloor.Mode mode : BlockingFloor.Mode.values()) {
            try (ServerSocket server = BlockingFloor.serve("127.0.0.1", mode);
                 BlockingFloor.Client client = new BlockingFloor.Client("127.0.0.1", server.getLocalPort(), 36, 80,
                         16)) {
                for (int i = 0; i < 50; i++) {
                    client.roundTrips(16); // returns only once the 16 pongs of 80 B were read
                    client.roundTrips(1);
                }
            }
        }
    }

    @Test
    void batchedModeAnswersPingsSentTogetherAtOnce() throws IOException {
        try (ServerSocket server = BlockingFloor.serve("127.0.0.1", BlockingFloor.Mode.BATCHED);
             Socket s = new Socket("127.0.0.1", server.getLocalPort())) {
            s.setSoTimeout(10_000); // a pong that never comes fails the test instead of hanging it
            byte[] pings = new byte[16 * 24];
            for (int i = 0; i < 16; i++) {
                BlockingFloor.putIntLE(pings, i * 24, 20);
                BlockingFloor.putIntLE(pings, i * 24 + 4, 32);
            }
            OutputStream out = s.getOutputStream();
            out.write(pings);
            out.flush();
            InputStream in = s.getInputStream();
            ByteArrayOutputStream got = new ByteArrayOutputStream();
            byte[] buf = new byte[4096];
            while (got.size() < 16 * 32) {
                int n = in.read(buf);
                assertTrue(n > 0, "the floor closed the connection after " + got.size() + " bytes");
                got.write(buf, 0, n);
            }
            byte[] pongs = got.toByteArray();
            assertEquals(16 * 32, pongs.length);
            for (int i = 0; i < 16; i++) {
                assertEquals(28, BlockingFloor.intLE(pongs, i * 32), "pong " + i + "'s length field");
            }
        }
    }
}
