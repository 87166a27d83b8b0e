package io.membus.core;

import org.junit.jupiter.api.Test;

import java.time.Duration;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Deadline scopes: nested scopes keep the earliest deadline; a cleanup gets at least its own budget. */
class OperationDeadlineTest {

    /** The scope's deadline as {@link OperationDeadline#until} sees it for something with no bound of its own. */
    private static long scopeDeadline() {
        return OperationDeadline.until(System.nanoTime(), Long.MAX_VALUE / 4);
    }

    @Test
    void aCleanupInGoodTimeKeepsWhatTheOperationHasLeftAndOneAfterItsDeadlineGetsItsOwnBudget() {
        long outer = OperationDeadline.enter(Duration.ofSeconds(30));
        try {
            long operationDeadline = scopeDeadline();
            long cleanup = OperationDeadline.enterCleanup();
            try {
                assertEquals(operationDeadline, scopeDeadline(),
                        "a cleanup with 30 s left keeps them (not cut to " + OperationDeadline.CLEANUP + ")");
            } finally {
                OperationDeadline.exit(cleanup);
            }
        } finally {
            OperationDeadline.exit(outer);
        }

        long spent = OperationDeadline.enterNanos(1); // a deadline already past
        try {
            long before = System.nanoTime();
            long cleanup = OperationDeadline.enterCleanup();
            try {
                long d = scopeDeadline();
                assertTrue(d - before >= OperationDeadline.CLEANUP.toNanos(), "a cleanup past the deadline gets its budget");
                assertTrue(d - System.nanoTime() <= OperationDeadline.CLEANUP.toNanos(), "and no more");
            } finally {
                OperationDeadline.exit(cleanup);
            }
        } finally {
            OperationDeadline.exit(spent);
        }
        assertFalse(OperationDeadline.active(), "every scope closed");
    }
}
