package io.membus.collections;

import com.google.common.collect.testing.QueueTestSuiteBuilder;
import com.google.common.collect.testing.TestStringQueueGenerator;
import com.google.common.collect.testing.features.CollectionFeature;
import com.google.common.collect.testing.features.CollectionSize;
import junit.extensions.TestSetup;
import junit.framework.Test;
import junit.framework.TestCase;
import junit.framework.TestSuite;

import java.util.Queue;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Guava testlib's {@code Queue} suite (the one Guava runs on its own queues) over
 * {@link DsmQueue}s of a 3-node in-JVM cluster: each queue is created on one node,
 * filled through a second, and handed to the tester through a third. Runs through
 * the JUnit vintage engine.
 */
public class DsmQueueGuavaSuiteTest extends TestCase {
    static final int CAPACITY = 16;
    private static CollCluster cluster;
    private static final AtomicInteger QUEUES = new AtomicInteger();

    public static Test suite() {
        TestSuite tests = QueueTestSuiteBuilder.using(new TestStringQueueGenerator() {
                    @Override
                    protected Queue<String> create(String[] elements) {
                        int n = QUEUES.incrementAndGet();
                        String name = "guava-" + n;
                        int creator = 1 + n % 3;
                        cluster.node(creator).queue(name, String.class, CAPACITY);
                        DsmQueue<String> filler = cluster.node(1 + (n + 1) % 3).queue(name, String.class, CAPACITY);
                        for (String e : elements) {
                            filler.add(e);
                        }
                        return cluster.node(1 + (n + 2) % 3).queue(name, String.class, CAPACITY);
                    }
                })
                .named("DsmQueue over 3 nodes")
                .withFeatures(CollectionFeature.GENERAL_PURPOSE, CollectionFeature.KNOWN_ORDER, CollectionSize.ANY)
                .createTestSuite();
        return new TestSetup(tests) {
            @Override
            protected void setUp() {
                cluster = new CollCluster("local", 3);
            }

            @Override
            protected void tearDown() {
                cluster.close();
                cluster = null;
            }
        };
    }
}
