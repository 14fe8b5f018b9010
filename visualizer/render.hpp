// The window and its GL context (GLFW, OpenGL 3.3 core), ImGui's GLFW and OpenGL3 backends,
// and frames captured to PNG through an offscreen framebuffer, so that screenshots do not
// depend on the window being visible (or the screen being as large as the image).
#pragma once

#include <string>

struct GLFWwindow;

namespace fs::viz {

class App;

class Renderer {
 public:
  ~Renderer();
  // Opens a w×h window (hidden unless `visible`; swaps wait for the display's refresh when
  // `vsync`) and sets ImGui up. Returns false and a one-line reason when there is no display
  // or no OpenGL 3.3.
  bool init(int w, int h, bool visible, bool vsync, std::string& error);
  void shutdown();

  // One frame of the app. Offscreen frames go to the capture framebuffer at exactly w×h,
  // with the mouse away; on-screen frames are shown and take the window's input.
  void frame(App& app, float dt, bool offscreen);
  // Writes the last offscreen frame as a PNG.
  bool save_png(const std::string& path, std::string& error);

  // Waits until the GPU (or the software renderer) has finished every frame submitted.
  void finish();
  bool should_close() const;
  GLFWwindow* window() const { return window_; }
  const std::string& renderer_name() const { return gl_renderer_; }

 private:
  bool make_capture_target(std::string& error);

  GLFWwindow* window_ = nullptr;
  int w_ = 0, h_ = 0;
  unsigned fbo_ = 0, color_rb_ = 0;
  bool imgui_ready_ = false;
  std::string gl_renderer_;
};

}  // namespace fs::viz
