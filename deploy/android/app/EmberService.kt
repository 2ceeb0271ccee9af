// A sketch, not compiled here (no Android SDK on the build machine): a foreground service that
// runs the static `ember` shipped as jniLibs/arm64-v8a/libember.so and serves on a Unix socket in
// the app's private folder. See deploy/android/README.md ("Inside an app") for the manifest and
// packaging settings it relies on (extractNativeLibs, foregroundServiceType).
package org.example.ember

import android.app.Notification
import android.app.NotificationChannel
import android.app.NotificationManager
import android.app.Service
import android.content.Intent
import android.content.pm.ServiceInfo
import android.os.IBinder
import java.io.File

class EmberService : Service() {
    private var process: Process? = null

    val socketPath: String get() = File(filesDir, "ember.sock").path

    override fun onStartCommand(intent: Intent?, flags: Int, startId: Int): Int {
        startForeground(1, notification(), ServiceInfo.FOREGROUND_SERVICE_TYPE_SPECIAL_USE)
        if (process?.isAlive != true) {
            val model = File(filesDir, "models/model.gguf").path  // downloaded by the app
            // nativeLibraryDir is the only app folder Android lets an app execute files from.
            val ember = File(applicationInfo.nativeLibraryDir, "libember.so").path
            process = ProcessBuilder(
                ember, "serve", "-m", model, "--no-tcp", "--listen", "unix:$socketPath",
                "--threads", "4",  // the fast cores; the default counts the slow ones too
            ).redirectErrorStream(true)
                .redirectOutput(File(filesDir, "ember.log"))
                .start()
        }
        return START_STICKY
    }

    override fun onDestroy() {
        // SIGTERM: running streams get --shutdown-grace seconds, then the daemon exits 0.
        process?.destroy()
        process = null
        super.onDestroy()
    }

    override fun onBind(intent: Intent?): IBinder? = null

    private fun notification(): Notification {
        val nm = getSystemService(NotificationManager::class.java)
        nm.createNotificationChannel(NotificationChannel("ember", "Ember", NotificationManager.IMPORTANCE_LOW))
        return Notification.Builder(this, "ember")
            .setContentTitle("Local model running")
            .setSmallIcon(android.R.drawable.stat_sys_download_done)
            .build()
    }
}

// Talking to it: android.net.LocalSocket to LocalSocketAddress(socketPath,
// LocalSocketAddress.Namespace.FILESYSTEM), then a plain HTTP/1.1 request, e.g.
//   POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n
//   Content-Length: N\r\nConnection: close\r\n\r\n{"messages":[...],"stream":true}
// and read the server-sent events ("data: {...}" lines, then "data: [DONE]").
