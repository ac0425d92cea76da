package io.snowconnect;

import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;

import org.apache.kafka.connect.errors.ConnectException;

/**
 * Where the plugin is installed: the directory holding {@code bin/<os>-<arch>/snow-connect},
 * {@code components/} and the operator's {@code snow-connect.properties} — in Confluent Hub's layout
 * (the release archive) the parent of the {@code lib/} holding the jar, else the jar's own directory.
 */
record PluginHome(Path dir) {
    static PluginHome locate() {
        try {
            Path jar = Path.of(PluginHome.class.getProtectionDomain().getCodeSource().getLocation().toURI());
            return new PluginHome(home(jar.getParent()));
        } catch (URISyntaxException | SecurityException e) {
            throw new ConnectException("cannot tell where the snow-connect plugin is installed: " + e.getMessage(), e);
        }
    }

    /** The plugin's directory for a jar in {@code jarDir}: Confluent Hub's {@code <plugin>/lib/} means {@code <plugin>}. */
    static Path home(Path jarDir) {
        Path parent = jarDir.getParent();
        boolean hubLayout = jarDir.getFileName() != null && jarDir.getFileName().toString().equals("lib")
            && parent != null && Files.isRegularFile(parent.resolve("manifest.json"));
        return hubLayout ? parent : jarDir;
    }

    /** The executor binary of this platform. */
    Path binary() {
        String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT).startsWith("linux") ? "linux" : System.getProperty("os.name");
        String arch = switch (System.getProperty("os.arch", "")) {
            case "amd64", "x86_64" -> "x86_64";
            case "aarch64", "arm64" -> "aarch64";
            default -> System.getProperty("os.arch");
        };
        Path binary = dir.resolve("bin").resolve(os + "-" + arch).resolve("snow-connect");
        if (!Files.isExecutable(binary)) {
            throw new ConnectException("the snow-connect plugin has no executor for " + os + "-" + arch + " (" + binary
                + " is missing or not executable); the plugin ships linux-x86_64 and linux-aarch64");
        }
        return binary;
    }
}
