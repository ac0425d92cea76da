package io.snowconnect;

import java.io.BufferedReader;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.connect.errors.ConnectException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One {@code snow-connect task-executor} child process and the framed protocol spoken with it
 * (ADR 0037): a 4-byte big-endian length, a 1-byte kind, the body. One request at a time; the
 * executor's stderr (its log, redacted) is forwarded to Connect's log. Closing the executor
 * closes its stdin, which ends it; it is killed if it has not ended within a few seconds.
 */
final class Executor implements AutoCloseable {
    static final byte PLAN = 'P', OPEN_SOURCE = 'O', NEXT = 'N', STOP = 'S';
    static final byte OPEN_SINK = 'K', PUT = 'W';
    static final byte JSON = 'J', BATCH = 'B', EMPTY = 'E', FAILED = 'F', OUTCOMES = 'R';

    private static final Logger LOG = LoggerFactory.getLogger(Executor.class);

    /** An answer: its kind and body. */
    record Answer(byte kind, byte[] body) {
        String text() {
            return new String(body, StandardCharsets.UTF_8);
        }
    }

    private final Process process;
    private final DataOutputStream in;
    private final DataInputStream out;
    private final String name;
    private volatile boolean closing;

    private Executor(Process process, String name) {
        this.process = process;
        this.name = name;
        this.in = new DataOutputStream(process.getOutputStream());
        this.out = new DataInputStream(process.getInputStream());
    }

    /** Starts an executor of the plugin installed at {@code home}; {@code name} labels its log. */
    static Executor start(PluginHome home, String name) {
        Path binary = home.binary();
        ProcessBuilder builder = new ProcessBuilder(binary.toString(), "task-executor", "--plugin-dir", home.dir().toString());
        builder.redirectErrorStream(false);
        try {
            Process process = builder.start();
            Executor executor = new Executor(process, name);
            executor.forwardLog();
            return executor;
        } catch (IOException e) {
            throw new ConnectException("starting the snow-connect executor " + binary + ": " + e.getMessage(), e);
        }
    }

    private void forwardLog() {
        Thread t = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(process.getErrorStream(), StandardCharsets.UTF_8))) {
                String line;
                while ((line = r.readLine()) != null) {
                    if (line.contains(" ERROR ")) {
                        LOG.error("[{}] {}", name, line);
                    } else if (line.contains(" WARN ")) {
                        LOG.warn("[{}] {}", name, line);
                    } else {
                        LOG.info("[{}] {}", name, line);
                    }
                }
            } catch (IOException ignored) {
                // The executor ended.
            }
        }, "snow-connect-log-" + name);
        t.setDaemon(true);
        t.start();
    }

    /** Sends one request and reads its answer; an ended executor is a ConnectException. */
    synchronized Answer request(byte kind, byte[] body) {
        try {
            in.writeInt(body.length + 1);
            in.writeByte(kind);
            in.write(body);
            in.flush();
            int length = out.readInt();
            if (length < 1 || length > (256 << 20)) {
                throw new ConnectException("the snow-connect executor sent a frame of " + length + " bytes");
            }
            byte answer = out.readByte();
            byte[] answerBody = new byte[length - 1];
            out.readFully(answerBody);
            return new Answer(answer, answerBody);
        } catch (EOFException e) {
            if (closing) {
                // Stopped while a request was out (Connect stops a task from another thread).
                return new Answer(EMPTY, new byte[0]);
            }
            throw new ConnectException("the snow-connect executor ended" + exitStatus() + " (its log above says why)", e);
        } catch (IOException e) {
            if (closing) {
                return new Answer(EMPTY, new byte[0]);
            }
            throw new ConnectException("talking to the snow-connect executor: " + e.getMessage() + exitStatus(), e);
        }
    }

    private String exitStatus() {
        try {
            if (process.waitFor(2, TimeUnit.SECONDS)) {
                return " with status " + process.exitValue();
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return "";
    }

    /** Ends the executor: its stdin closed (it stops), then killed if it lingers. */
    @Override
    public void close() {
        closing = true;
        try {
            process.getOutputStream().close();
        } catch (IOException ignored) {
            // Already closed.
        }
        try {
            if (!process.waitFor(10, TimeUnit.SECONDS)) {
                LOG.warn("[{}] the snow-connect executor did not end within 10 s of its input closing; killing it", name);
                process.destroyForcibly();
            }
        } catch (InterruptedException e) {
            process.destroyForcibly();
            Thread.currentThread().interrupt();
        }
    }

    /** A FAILED answer's message and per-key errors. */
    static List<String[]> errors(Answer answer) {
        List<String[]> out = new ArrayList<>();
        var node = Json.parse(answer.body());
        for (var e : node.path("errors")) {
            out.add(new String[] {e.path("key").asText(""), e.path("message").asText("")});
        }
        return out;
    }

    /** A FAILED answer as one message. */
    static String message(Answer answer) {
        var node = Json.parse(answer.body());
        StringBuilder text = new StringBuilder(node.path("message").asText("the executor refused"));
        for (String[] e : errors(answer)) {
            text.append("\n  ").append(e[0].isEmpty() ? "" : e[0] + ": ").append(e[1]);
        }
        return text.toString();
    }
}
